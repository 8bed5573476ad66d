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


def _agent_import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "agent").glob("*.py")):
        name = "agent" if path.stem == "__init__" else f"agent.{path.stem}"
        graph[name] = {
            module
            for module in _imported_modules(path)
            if module.startswith("agent.") and module.count(".") == 1
        }
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of modules that import one another, directly or around a circle (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for neighbour in sorted(graph.get(node, set()) & graph.keys()):
            if neighbour not in index:
                visit(neighbour)
                low[node] = min(low[node], low[neighbour])
            elif neighbour in stack:
                low[node] = min(low[node], index[neighbour])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_of_agent_imports_itself_around_a_circle() -> None:
    """Counting imports made only for type checking or inside functions: a circle of those still
    means no module of it can be read, tested or replaced without the others."""
    assert _circles(_agent_import_graph()) == []


def test_circle_finder_sees_a_circle() -> None:
    graph = {
        "agent.a": {"agent.b"},
        "agent.b": {"agent.c"},
        "agent.c": {"agent.a"},
        "agent.d": set(),
    }
    assert _circles(graph) == [["agent.a", "agent.b", "agent.c"]]
