"""Starting `tests.support.crash_child` for a concurrent batch, as the parallel crash tests do:
the child runs `batch` side by side (`--tool-concurrency 4`) and records each tool run in
`run_log`, which outlives the SIGKILL."""

from __future__ import annotations

from pathlib import Path

from tests.support import children
from tests.support.engine_fixtures import RUN_LOG_ENV


async def start_batch_child(
    url: str, session: str, turn: str, batch: str, run_log: Path, *extra: str
) -> children.Process:
    return await children.start(
        "tests.support.crash_child",
        url,
        session,
        turn,
        "--batch",
        batch,
        "--tool-concurrency",
        "4",
        *extra,
        env={RUN_LOG_ENV: str(run_log)},
    )
