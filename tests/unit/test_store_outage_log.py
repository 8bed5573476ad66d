"""The runtime's outage log, which says so once each way, and its retry back-off."""

from __future__ import annotations

import logging

import pytest

from agent import StoreUnavailableError
from agent._store_outage import OutageLog, backoff


def test_the_outage_log_says_it_once_each_way(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agent")
    outage = OutageLog()
    error = StoreUnavailableError("cannot reach the database sqlite:///x.db: database is locked")
    for _ in range(5):
        outage.failed(error, writing=True)
        outage.failed(error, writing=False)
    assert outage.down
    # reads that work do not end an outage that writes are still in (SQLite's lock, say)
    outage.reached(writing=False)
    outage.failed(error, writing=True)
    assert outage.down
    outage.reached(writing=True)
    outage.reached(writing=True)
    assert not outage.down
    assert [r.getMessage() for r in caplog.records] == [
        "database unavailable, retrying: cannot reach the database sqlite:///x.db: "
        "database is locked",
        "database reachable again",
    ]


def test_backoff_doubles_up_to_its_ceiling() -> None:
    delays = backoff(0.1, 1.0)
    taken = [next(delays) for _ in range(8)]
    ceilings = [0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0]
    assert all(c / 2 <= d <= c for d, c in zip(taken, ceilings, strict=True)), taken
