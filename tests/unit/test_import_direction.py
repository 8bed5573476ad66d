"""Imports point one way: bot → agent, bot → storage, storage → agent. A wrong arrow fails here,
including imports hidden inside functions or under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"agent": {"bot", "storage"}, "storage": {"bot"}, "bot": set()}


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


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
