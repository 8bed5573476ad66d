"""No product code waits with `asyncio.wait_for`. On Python 3.11 (the oldest this runs on) a
`wait_for` whose awaitable finishes just as its task is cancelled returns the result and drops
the cancellation: the task goes on, and whatever cancelled it to stop it (a shutdown) waits for
ever. That was the renderer's hang at close in CI. `asyncio.timeout` raises the cancellation as
it should; use it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("agent", "storage", "bot", "examples")


def _wait_for_calls(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "wait_for"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "asyncio"
        ):
            lines.append(node.lineno)
    return lines


def test_no_product_module_calls_asyncio_wait_for() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for area in PRODUCT
        for path in sorted((ROOT / area).rglob("*.py"))
        for line in _wait_for_calls(path)
    ]
    assert found == [], "use `async with asyncio.timeout(...)` instead of asyncio.wait_for"
