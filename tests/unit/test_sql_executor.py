"""The stores' worker threads: urgent transactions go ahead of queued background ones, a
cancelled wait drops a transaction that has not started, closing waits for what is queued; with
several threads (PostgreSQL) transactions run side by side, on threads started as needed."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Connection

from storage.sql.dialects import dialect_for
from storage.sql.executor import ThreadExecutor


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
    rows = await executor.read(
        lambda c: c.execute(text("SELECT name FROM log ORDER BY rowid")).all()
    )
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
    [thread] = made.threads
    thread.join(5)
    assert not thread.is_alive()
    check = create_engine(f"sqlite:///{tmp_path / 'y.db'}")
    with check.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT name FROM log"))] == ["w0", "w1", "w2"]
    check.dispose()


@pytest.fixture
async def pool(tmp_path: Path):
    """Three threads, a pooled connection per transaction: PostgreSQL's setup, on a file."""
    made = ThreadExecutor(create_engine(f"sqlite:///{tmp_path / 'p.db'}"), name="pool", threads=3)
    await made.write(lambda c: c.execute(text("CREATE TABLE log (name TEXT)")))
    yield made
    await made.close()


def _meeting(barrier: threading.Barrier):
    def body(conn: Connection) -> str:
        barrier.wait(10)  # only returns once all parties are in their transactions at once
        conn.execute(text("SELECT 1"))
        return threading.current_thread().name

    return body


async def test_transactions_run_side_by_side_on_threads_started_as_needed(pool) -> None:
    assert len(pool.threads) == 1, "one thread so far: one transaction ever ran at a time"
    barrier = threading.Barrier(3)
    names = await asyncio.gather(*(pool.read(_meeting(barrier)) for _ in range(3)))
    assert sorted(names) == ["pool-0", "pool-1", "pool-2"]
    assert threading.current_thread().name not in names
    await asyncio.gather(*(pool.read(_meeting(threading.Barrier(1))) for _ in range(6)))
    assert len(pool.threads) == 3, "never more threads than asked for"


async def test_with_every_thread_busy_urgent_transactions_go_first(pool) -> None:
    gates = [threading.Event() for _ in range(3)]
    running = threading.Barrier(4)

    def hold(gate: threading.Event) -> Callable[[Connection], bool]:
        def body(conn: Connection) -> bool:
            running.wait(10)
            return gate.wait(10)

        return body

    busy = [asyncio.create_task(pool.read(hold(gate))) for gate in gates]
    # Every thread busy before anything queues: a read still waiting for its thread would count
    # as queued, and the thread that took it later could run a background job first.
    await asyncio.to_thread(running.wait, 10)
    background = [asyncio.create_task(pool.write(_logging(f"step {i}"))) for i in range(2)]
    await _queued(pool, 2)
    urgent = asyncio.create_task(pool.write(_logging("ack"), urgent=True))
    await _queued(pool, 3)
    gates[0].set()  # one thread comes free: it takes the urgent one, the others still wait
    await urgent  # (the freed thread goes on to a background job at once: the log tells order)
    for gate in gates:
        gate.set()
    await asyncio.gather(*busy, *background)
    log = await _log(pool)
    assert log[0] == "ack"
    assert sorted(log[1:]) == ["step 0", "step 1"]


async def test_close_ends_every_thread_and_closes_the_pool(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'z.db'}")
    made = ThreadExecutor(engine, name="closing", threads=2)
    barrier = threading.Barrier(2)
    await asyncio.gather(*(made.read(_meeting(barrier)) for _ in range(2)))
    assert engine.pool.checkedin() == 2
    await made.close()
    for thread in made.threads:
        thread.join(5)
        assert not thread.is_alive()
    assert engine.pool.checkedin() == 0


# -- group commit (SQLite) ------------------------------------------------------------------


@pytest.fixture
async def grouping(tmp_path: Path):
    """The SQLite store's own executor (its dialect's setup), which commits queued writes
    together."""
    made = dialect_for(f"sqlite+aiosqlite:///{tmp_path / 'g.db'}").executor()
    assert isinstance(made, ThreadExecutor)
    await made.write(lambda c: c.execute(text("CREATE TABLE log (name TEXT UNIQUE)")))
    yield made
    await made.close()


async def _running_until(executor: ThreadExecutor, gate: threading.Event) -> asyncio.Task[str]:
    """A write that holds the thread until `gate`, started before anything queues behind it
    (so nothing is grouped with it)."""
    entered = threading.Event()

    def body(conn: Connection) -> str:
        entered.set()
        return _logging("running", gate)(conn)

    task = asyncio.create_task(executor.write(body))
    assert await asyncio.to_thread(entered.wait, 10)
    return task


def _commits(executor: ThreadExecutor) -> list[int]:
    counted = [0]
    event.listen(executor._engine, "commit", lambda conn: counted.__setitem__(0, counted[0] + 1))
    return counted


async def test_queued_writes_commit_together_and_a_failing_one_alone_rolls_back(
    grouping: ThreadExecutor,
) -> None:
    commits = _commits(grouping)
    gate = threading.Event()
    busy = await _running_until(grouping, gate)

    def failing(conn: Connection) -> None:
        conn.execute(text("INSERT INTO log (name) VALUES ('from the failing one')"))
        raise RuntimeError("this one fails")

    names = [f"step {i}" for i in range(5)]
    queued = [asyncio.create_task(grouping.write(_logging(n))) for n in names[:2]]
    queued.append(asyncio.create_task(grouping.write(failing)))
    queued += [asyncio.create_task(grouping.write(_logging(n))) for n in names[2:]]
    duplicate = asyncio.create_task(grouping.write(_logging("step 0")))
    await _queued(grouping, 7)
    gate.set()
    assert await busy == "running"
    outcomes = await asyncio.gather(*queued, duplicate, return_exceptions=True)
    assert outcomes[:2] == names[:2]
    assert isinstance(outcomes[2], RuntimeError)
    assert outcomes[3:6] == names[2:]
    assert "UNIQUE" in str(outcomes[6])  # a duplicate step fails alone, as it would by itself
    assert await _log(grouping) == ["running", *names]
    assert commits[0] == 2, "the seven queued writes committed in one transaction"


async def test_each_write_in_a_group_sees_its_own_callers_context(
    grouping: ThreadExecutor,
) -> None:
    who = contextvars.ContextVar[str]("who")
    gate = threading.Event()
    busy = await _running_until(grouping, gate)

    async def write_as(name: str) -> str:
        who.set(name)
        return await grouping.write(lambda conn: who.get())

    writers = [asyncio.create_task(write_as(f"turn {i}")) for i in range(3)]
    await _queued(grouping, 3)
    gate.set()
    await busy
    assert await asyncio.gather(*writers) == ["turn 0", "turn 1", "turn 2"]


async def test_reads_are_never_grouped_with_writes(grouping: ThreadExecutor) -> None:
    gate = threading.Event()
    busy = await _running_until(grouping, gate)
    first = asyncio.create_task(grouping.write(_logging("a")))
    read = asyncio.create_task(_log(grouping))
    second = asyncio.create_task(grouping.write(_logging("b")))
    await _queued(grouping, 3)
    gate.set()
    await asyncio.gather(busy, first, second)
    # the read ran in its own transaction, in its place in the queue: after "a", before "b"
    assert await read == ["running", "a"]


async def test_the_loop_does_not_wait_for_a_new_thread_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Thread.start` returns once the new thread runs: on a busy machine the OS may take long to
    run it, and the loop must not wait for that (the loop watch saw it held 130 ms)."""
    scheduled = threading.Event()
    start = threading.Thread.start

    def slow_start(self: threading.Thread) -> None:
        scheduled.wait(10)  # the OS gets round to the new thread only when the test says
        start(self)

    made = ThreadExecutor(create_engine(f"sqlite:///{tmp_path / 's.db'}"), name="slow-start")
    monkeypatch.setattr(threading.Thread, "start", slow_start)
    reading = asyncio.ensure_future(made.read(lambda c: c.execute(text("SELECT 1")).scalar()))
    began = time.monotonic()
    await asyncio.sleep(0)  # the read asks for a thread
    assert time.monotonic() - began < 5, "the loop waited for the thread to start"
    assert not reading.done()
    scheduled.set()
    assert await reading == 1
    await made.close()
