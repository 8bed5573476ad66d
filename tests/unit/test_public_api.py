"""`__all__` is the public API of `agent` and `storage`, tested by equality (as httpx does): it
names exactly the public objects the package holds, each once, so a name added without exporting
it, or exported without existing, fails here. (Its order is ruff's RUF022, checked by lint.)"""

from __future__ import annotations
import __future__

from types import ModuleType

import pytest

import agent
import storage

LAZY = {agent: {"AnthropicModel", "AnthropicSettings"}}
"""Names a package's module `__getattr__` imports on first use (the Anthropic SDK is heavy)."""


def _public(package: ModuleType) -> set[str]:
    held = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_")
        and not isinstance(value, ModuleType | __future__._Feature)  # submodules; `annotations`
    }
    return held | LAZY.get(package, set())


@pytest.mark.parametrize("package", [agent, storage], ids=lambda p: p.__name__)
def test_all_is_exactly_the_public_names(package: ModuleType) -> None:
    assert len(set(package.__all__)) == len(package.__all__), "a name exported twice"
    assert set(package.__all__) == _public(package)


@pytest.mark.parametrize("package", [agent, storage], ids=lambda p: p.__name__)
def test_every_exported_name_resolves(package: ModuleType) -> None:
    missing = [name for name in package.__all__ if not hasattr(package, name)]
    assert not missing, f"{package.__name__}.__all__ names missing attributes: {missing}"
