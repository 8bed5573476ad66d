"""The SQLite store's thread: urgent transactions go ahead of queued background ones, a
cancelled wait drops a transaction that has not started, and closing waits for what is queued."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection

from storage.sql_executor import ThreadExecutor


@pytest.fixture
async def executor(tmp_path: Path):
    made = ThreadExecutor(create_engine(f"sqlite:///{tmp_path / 'x.db'}"), name="test-store")
    await made.write(lambda c: c.execute(text("CREATE TABLE log (name TEXT)")))
    yield made
    await made.close()


def _logging(name: str, gate: threading.Event | None = None):
    def body(conn: Connection) -> str:
        if gate is not None:
            assert gate.wait(10)
        conn.execute(text("INSERT INTO log (name) VALUES (:n)"), {"n": name})
        return name

    return body


async def _log(executor: ThreadExecutor) -> list[str]:
    rows = await executor.read(lambda c: c.execute(text("SELECT name FROM log")).all())
    return [row[0] for row in rows]


async def _queued(executor: ThreadExecutor, count: int) -> None:
    """Wait until `count` jobs wait behind the running one (the queue is the executor's)."""
    for _ in range(500):
        if sum(len(lane) for lane in executor._lanes) >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the jobs were never queued")


async def test_urgent_transactions_go_before_queued_background_ones(executor) -> None:
    gate = threading.Event()
    busy = asyncio.create_task(executor.write(_logging("running", gate)))
    background = [asyncio.create_task(executor.write(_logging(f"step {i}"))) for i in range(3)]
    await _queued(executor, 3)
    urgent = asyncio.create_task(executor.write(_logging("ack"), urgent=True))
    await _queued(executor, 4)
    gate.set()
    await asyncio.gather(busy, *background, urgent)
    # The running transaction finishes first; then the urgent one; the rest in arrival order.
    assert await _log(executor) == ["running", "ack", "step 0", "step 1", "step 2"]


async def test_a_cancelled_wait_drops_a_transaction_that_has_not_started(executor) -> None:
    gate = threading.Event()
    busy = asyncio.create_task(executor.write(_logging("running", gate)))
    dropped = asyncio.create_task(executor.write(_logging("dropped")))
    await _queued(executor, 1)
    dropped.cancel()
    with pytest.raises(asyncio.CancelledError):
        await dropped
    gate.set()
    await busy
    assert await _log(executor) == ["running"]


async def test_a_failing_transaction_raises_to_its_caller_and_rolls_back(executor) -> None:
    def failing(conn: Connection) -> None:
        _logging("half")(conn)
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        await executor.write(failing)
    assert await _log(executor) == []


async def test_close_waits_for_what_is_queued_and_ends_the_thread(tmp_path: Path) -> None:
    made = ThreadExecutor(create_engine(f"sqlite:///{tmp_path / 'y.db'}"), name="test-close")
    await made.write(lambda c: c.execute(text("CREATE TABLE log (name TEXT)")))
    gate = threading.Event()
    writes = [asyncio.create_task(made.write(_logging(f"w{i}", gate))) for i in range(3)]
    await _queued(made, 2)
    closing = asyncio.create_task(made.close())
    gate.set()
    await asyncio.gather(*writes, closing)
    made._thread.join(5)
    assert not made._thread.is_alive()
    check = create_engine(f"sqlite:///{tmp_path / 'y.db'}")
    with check.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT name FROM log"))] == ["w0", "w1", "w2"]
    check.dispose()
