"""Imports point one way: bot → agent, bot → storage, storage → agent's seams and types. A wrong
arrow fails here, including imports hidden inside functions or under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"agent": {"bot", "storage"}, "storage": {"bot"}, "bot": set()}
STORE_SIDE_OF_AGENT = {
    "agent.seams",  # the Protocols a store (or a dispatcher, a relay) implements
    "agent.errors",
    "agent.events",
    "agent.messages",
    "agent.turn_input",
    "agent.redaction",  # scrubbing secrets out of a driver's error text
}
"""All of `agent` that `storage` may import: what a store author needs, never the engine's
workings (the runtime, the turn loop, the hub), so a store stays swappable."""


def _imported_modules(path: Path) -> set[str]:
    modules: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module)
            modules.update(f"{node.module}.{alias.name}" for alias in node.names)
    return modules


def _imported_roots(path: Path) -> set[str]:
    return {module.split(".")[0] for module in _imported_modules(path)}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules found in {package}/"
    wrong = {
        f"{path.relative_to(ROOT)} imports {root}"
        for path in files
        for root in _imported_roots(path) & FORBIDDEN[package]
    }
    assert not wrong, sorted(wrong)


def test_walker_sees_a_wrong_arrow(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from storage.sql_store import SqlStore\n    return SqlStore\n")
    assert "storage" in _imported_roots(bad)


def test_storage_imports_only_the_store_side_of_agent() -> None:
    wrong = set()
    for path in sorted((ROOT / "storage").rglob("*.py")):
        for module in _imported_modules(path):
            parts = module.split(".")
            if parts[0] != "agent" or len(parts) < 2:
                continue
            # `from agent.seams import X` lists both agent.seams and agent.seams.X
            if ".".join(parts[:2]) not in STORE_SIDE_OF_AGENT:
                wrong.add(f"{path.relative_to(ROOT)} imports {'.'.join(parts[:2])}")
    assert not wrong, sorted(wrong)
