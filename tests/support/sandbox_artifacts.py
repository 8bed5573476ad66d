"""Where the sandbox page's browser test saves its step screenshots, and the run's summary line
naming that directory.

A plugin of the root conftest, not of `tests/sandbox/`: under `pytest -n` the test runs in a
worker, and only the controller writes the summary, so it looks for screenshots this run made.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
_started = time.time()


def artifacts_dir() -> Path:
    """`artifacts/sandbox/` at the repository's root, or `BOT_SANDBOX_ARTIFACTS`."""
    return Path(os.environ.get("BOT_SANDBOX_ARTIFACTS") or ROOT / "artifacts" / "sandbox")


def pytest_configure(config: Any) -> None:
    global _started
    _started = time.time()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    where = artifacts_dir()
    made = (
        [p for p in where.glob("*.png") if p.stat().st_mtime >= _started] if where.is_dir() else []
    )
    if made:
        terminalreporter.write_line(f"sandbox screenshots ({len(made)}): {where}")
