"""The public API, tested by equality (as httpx's `test_exported_members.py` does).

`agent` is what a host needs, `agent.seams` what a store, model or sink author needs,
`agent.models` the model adapters, `agent.mcp` MCP servers' tools, `storage` the stores. Each
`__all__` names exactly the public objects its module holds, each once; every other module of
`agent` is private (its name starts with an underscore), so a name added without exporting it,
or exported without existing, or a module made public by accident, fails here. (`__all__`'s
order is ruff's RUF022, checked by lint.) Who may import what is `test_import_direction.py`.
"""

from __future__ import annotations
import __future__

import pkgutil
from types import ModuleType

import pytest

import agent
import agent.mcp
import agent.models
import agent.seams
import storage

PUBLIC_MODULES = [agent, agent.seams, agent.models, agent.mcp, storage]
LAZY = {
    agent: {"AnthropicModel", "AnthropicSettings"},
    agent.models: {"AnthropicModel", "AnthropicSettings"},
    storage: {
        "DatabaseUrlError",
        "MemoryStore",
        "SchemaUpgrade",
        "SqlStore",
        "current_revision",
        "require_database",
        "upgrade_database",
    },
}
"""Names a package's module `__getattr__` imports on first use (the Anthropic SDK is heavy;
`storage` imports each store and the migrations only when they are asked for)."""


def _public(module: ModuleType) -> set[str]:
    held = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType | __future__._Feature)  # submodules; `annotations`
    }
    return held | LAZY.get(module, set())


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_all_is_exactly_the_public_names(module: ModuleType) -> None:
    assert len(set(module.__all__)) == len(module.__all__), "a name exported twice"
    assert set(module.__all__) == _public(module)


@pytest.mark.parametrize("module", PUBLIC_MODULES, ids=lambda m: m.__name__)
def test_every_exported_name_resolves(module: ModuleType) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]
    assert not missing, f"{module.__name__}.__all__ names missing attributes: {missing}"


def test_every_other_module_of_agent_is_private() -> None:
    public = {
        info.name
        for info in pkgutil.walk_packages(agent.__path__, "agent.")
        if not any(part.startswith("_") for part in info.name.split("."))
    }
    assert public == {"agent.mcp", "agent.models", "agent.seams"}


def test_the_host_api_does_not_hand_out_store_internals() -> None:
    """What only a store implements (leases, step commits, store handles) stays in `seams`."""
    for name in ("Lease", "StepCommit", "StoreHandle", "SessionRecord", "Dispatcher"):
        assert name in agent.seams.__all__
        assert name not in agent.__all__
