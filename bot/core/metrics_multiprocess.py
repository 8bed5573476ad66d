"""Metrics across `bot serve`'s web processes (`WEB_CONCURRENCY` > 1).

uvicorn forks (spawns) the web processes; each has its own counters, and a scrape reaches only
one of them. prometheus_client's multiprocess mode has every process write its values to files
in `PROMETHEUS_MULTIPROC_DIR`, and the scrape sums them (`bot.core.ops_server.exposition`). The
variable must be set before a web process imports prometheus_client, so `bot serve` sets it in
its own environment before uvicorn starts them: a fresh private directory when unset (removed
when the command ends), or the operator's, emptied first: files left by an earlier run would be
counted again, and a counter that starts at its old value reads as no restart to Prometheus.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bot.core.ops_server import MULTIPROC_DIR


@contextlib.contextmanager
def multiprocess_metrics(processes: int) -> Iterator[Path | None]:
    """While serving `processes` web processes: the directory their metrics go to (None with
    one process and no directory given: it keeps its counters in memory)."""
    given = os.environ.get(MULTIPROC_DIR)
    if processes <= 1 and not given:
        yield None
        return
    if given:  # the operator's: used even with one process, so emptied all the same
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink(missing_ok=True)
        yield directory
        return
    directory = Path(tempfile.mkdtemp(prefix="bot-metrics-"))  # 0700: this user's only
    os.environ[MULTIPROC_DIR] = str(directory)
    try:
        yield directory
    finally:
        os.environ.pop(MULTIPROC_DIR, None)
        shutil.rmtree(directory, ignore_errors=True)
