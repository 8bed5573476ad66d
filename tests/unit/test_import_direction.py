"""Imports point one way: bot → agent, bot → storage, storage → agent's seams and types. A wrong
arrow fails here, including imports hidden inside functions or under TYPE_CHECKING.

And they stop at `agent`'s public boundary: `bot/`, `examples/` and `bench/` (hosts) import only
`agent`, `agent.seams`, `agent.models` and `agent.mcp`; `storage/` (a store author) only
`agent.seams`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"agent": {"bot", "storage"}, "storage": {"bot"}, "bot": set()}
PUBLIC_OF_AGENT = {
    "bot": {"agent", "agent.seams", "agent.models", "agent.mcp"},
    "examples": {"agent", "agent.seams", "agent.models", "agent.mcp"},
    "bench": {"agent", "agent.seams", "agent.models", "agent.mcp"},
    "storage": {"agent.seams"},
}
"""What of `agent` each area may import: a store needs the seams, records, codecs and errors
(all in `agent.seams`), never the engine's workings (the runtime, the turn loop, the hub), so a
store stays swappable; a host needs the public API, never a private module."""


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
    bad.write_text("def f():\n    from storage.sql.store import SqlStore\n    return SqlStore\n")
    assert "storage" in _imported_roots(bad)


@pytest.mark.parametrize("area", sorted(PUBLIC_OF_AGENT))
def test_only_the_public_modules_of_agent_are_imported(area: str) -> None:
    allowed = PUBLIC_OF_AGENT[area]
    wrong = set()
    for path in sorted((ROOT / area).rglob("*.py")):
        for module in _imported_modules(path):
            if module.split(".")[0] != "agent":
                continue
            # `from agent.seams import X` lists both agent.seams and agent.seams.X
            if module not in allowed and module.rpartition(".")[0] not in allowed:
                wrong.add(f"{path.relative_to(ROOT)} imports {module}")
    assert not wrong, sorted(wrong)


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


PACKAGES = ("agent", "storage", "bot")
"""Where no module may import itself around a circle: the engine, the stores and the bot."""


def _module_edges(path: Path, modules: set[str]) -> set[str]:
    """The modules among `modules` that `path` imports. `from pkg import sub` imports the module
    `pkg.sub`, not `pkg`'s own names; `from pkg import Name` imports `pkg` (its `__init__`)."""
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                edges.add(child if child in modules else node.module)
    return edges & modules


def _import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    paths = {
        _module_name(path, root): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    modules = set(paths)
    return {name: _module_edges(path, modules) - {name} for name, path in paths.items()}


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


@pytest.mark.parametrize("package", PACKAGES)
def test_the_package_has_modules(package: str) -> None:
    assert any(name.partition(".")[0] == package for name in _import_graph())


def test_no_module_imports_itself_around_a_circle() -> None:
    """Anywhere in agent, storage and bot, counting imports made only for type checking or
    inside functions: a circle of those still means no module of it can be read, tested or
    replaced without the others."""
    assert _circles(_import_graph()) == []


def test_circle_walker_sees_type_checking_and_function_imports(tmp_path: Path) -> None:
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "__init__.py").write_text("")
    (tmp_path / "bot" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bot.b import B\n"
    )
    (tmp_path / "bot" / "b.py").write_text("def f():\n    from bot.a import A\n    return A\n")
    assert _circles(_import_graph(tmp_path, ("bot",))) == [["bot.a", "bot.b"]]


def test_importing_a_submodule_from_its_package_is_no_edge_to_the_package(tmp_path: Path) -> None:
    """`from bot import sub` inside a module `bot/__init__.py` imports is no circle; `from bot
    import Name` (a name the `__init__` defines) is one."""
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "__init__.py").write_text("from bot.sub import Name\n")
    (tmp_path / "bot" / "sub.py").write_text("Name = 1\n")
    (tmp_path / "bot" / "user.py").write_text("from bot import sub\n")
    graph = _import_graph(tmp_path, ("bot",))
    assert graph["bot.user"] == {"bot.sub"}
    assert _circles(graph) == []
    (tmp_path / "bot" / "sub.py").write_text("from bot import Other\nName = 1\n")
    assert _circles(_import_graph(tmp_path, ("bot",))) == [["bot", "bot.sub"]]


def test_circle_finder_sees_a_circle() -> None:
    graph = {
        "agent.a": {"agent.b"},
        "agent.b": {"agent.c"},
        "agent.c": {"agent.a"},
        "agent.d": set(),
    }
    assert _circles(graph) == [["agent.a", "agent.b", "agent.c"]]
