"""How a transaction body reaches the database: one hop per transaction, whatever the driver.

Every `SqlStore` method is a plain sync function `(Connection) -> result` (its "body"), so the SQL
is written once. A `ThreadExecutor` runs a body in one transaction, whole, on a worker thread of
its own, never on the event loop: a body may wait on a row lock, and a local tool runs inside it
(`agent._tool_steps`), which may take as long as its author wrote it to. On the loop either would
stop every ack, lease heartbeat and renderer of the process meanwhile.

- SQLite: one thread and one connection per store. A step commit costs one hand-off between the
  event loop and the thread. An async SQLite driver hands each cursor call to its thread instead
  (about twenty per commit), and those hand-offs, not SQLite, were most of a step's cost. One
  connection also suits SQLite's single writer: the store's writes queue up in-process instead of
  contending for the file lock.
  Step commits that queue up behind one another (many sessions' turns at once) commit together:
  one transaction and one fsync for the group, each body in a savepoint of its own, so one that
  fails is rolled back alone (`ThreadExecutor._commit_group`).
- PostgreSQL: psycopg 3's sync driver on as many threads as the pool has connections, each
  thread keeping the connection it opened (pinged first when it sat idle for a while, see
  `ping_after_idle`). PostgreSQL runs transactions side by side; when every
  thread is busy, the next transaction waits in this executor's queue, where urgent ones go first,
  rather than in the pool's. psycopg releases the GIL while it waits on the server, so the threads
  cost the loop little. (Before, the body ran on the loop through `AsyncConnection.run_sync`: a
  local tool sleeping 1 s stalled the loop 1 s.)

Write transactions are begun with the `WRITE_OPTION` execution option, which SQLite turns into
BEGIN IMMEDIATE (see `storage.sql.dialects`).

This is also where a database that cannot be reached, or a connection lost mid-transaction,
becomes `StoreUnavailableError` (see `storage.sql.errors`), whichever statement met it: every
transaction of every store passes here, and nowhere else needs to know the drivers' errors.
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import contextlib
import contextvars
import functools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Connection, Engine

from agent.seams import StoreUnavailableError
from storage.sql.errors import database_label, is_unavailable, unavailable_error

R = TypeVar("R")

WRITE_OPTION = "storage_write"
"""Execution option marking a transaction that will write (SQLite begins those IMMEDIATE)."""


class TransactionExecutor(Protocol):
    async def read(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        """Run `body` in a transaction that is rolled back afterwards (it only reads)."""
        ...

    async def write(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        """Run `body` in a write transaction: committed if it returns, rolled back if it raises.

        `urgent`: somebody is waiting on this one (Slack for its ack, a person for an answer to
        land), so where transactions queue it goes ahead of the background ones (the turns' step
        commits, the renderers' bookkeeping)."""
        ...

    async def close(self) -> None:
        """Release connections (and threads); the executor is not used afterwards."""
        ...


_URGENT, _BACKGROUND, _LAST = 0, 1, 2


class ThreadExecutor:
    """A sync engine confined to worker threads of its own, started as transactions need them.

    Every connection is made, used and closed on a worker thread (pysqlite connections refuse to
    cross threads, and that is the check we want). With `keep_connection` each thread keeps the
    one connection it opened rather than checking one out of the pool per transaction: for
    SQLite that changes nothing the database sees (a one-thread pool hands out the same
    connection every time) and saves the pool's bookkeeping on every step.

    Free threads take urgent transactions first, then the rest in arrival order. In a process
    that runs turns, the turns' commits (each with its fsync) keep SQLite's one thread busy most
    of the time under a burst, and an event's ack would wait behind all the commits queued
    before it (measured: bench/README.md, "Why the store is built as it is").
    """

    def __init__(
        self,
        engine: Engine,
        *,
        name: str = "sql-store",
        threads: int = 1,
        keep_connection: bool = False,
        database: str | None = None,
        group_writes: int = 1,
        ping_after_idle: float | None = None,
    ) -> None:
        """`database`: how errors name the database (the URL as configured, password hidden);
        by default the engine's URL. `group_writes` > 1 (one thread only): write transactions
        waiting in the queue when the thread comes free commit together, up to that many, each
        in a savepoint of its own (see `_commit_group`). `ping_after_idle` (with
        `keep_connection`): a kept connection unused for that many seconds is pinged before its
        next transaction and replaced if the ping fails, so a server restart or failover that
        killed it while idle fails no call (one in use a moment ago is as alive as a ping would
        show; pinging before every transaction cost each a round trip)."""
        if threads < 1:
            raise ValueError("a ThreadExecutor needs at least one thread")
        if group_writes > 1 and threads != 1:
            raise ValueError("group commit is for a one-thread executor (SQLite)")
        self._group_writes = group_writes
        self._engine = engine
        self._database = database or database_label(engine.url)
        self._name = name
        self._max_threads = threads
        self._keep_connection = keep_connection
        self._ping_after_idle = ping_after_idle
        # Two lanes and a wake-up token per job: all of it C-implemented and lock-free from
        # Python's side (a `queue.PriorityQueue` takes a Python-level Condition on every hop).
        self._lanes: tuple[collections.deque[_Job], collections.deque[_Job]] = (
            collections.deque(),
            collections.deque(),
        )
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        # Guards the thread count and the idle count, and makes "urgent first" exact when
        # several threads take jobs at once; held for a few bytecodes at a time.
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        """Threads done with their last job and not yet promised to a new one."""
        self._retired = 0
        self._closing: asyncio.Future[None] | None = None
        self._local = threading.local()
        """`connection`: the connection a thread keeps (with `keep_connection`); `used_at`: when
        its last transaction ended (`time.monotonic()`)."""

    @property
    def threads(self) -> list[threading.Thread]:
        """The worker threads started so far (for tests that check they end)."""
        return list(self._threads)

    async def read(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        return await self._hop(_URGENT if urgent else _BACKGROUND, self._transaction, body, False)

    async def write(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        return await self._hop(
            _URGENT if urgent else _BACKGROUND, self._transaction, body, True, write_body=body
        )

    async def close(self) -> None:
        """After everything already queued; the threads end with it, the last one disposing of
        the engine (its pooled connections are closed off the loop, on a thread they belong to).

        Closing again waits for the first close and does nothing more: the retired threads
        take no job, so a second round of retirements would wait forever (a bot and its test
        fixture, or a lifespan and a signal handler, may both close the store)."""
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close_once())
        await asyncio.shield(self._closing)

    async def _close_once(self) -> None:
        with self._lock:
            started = len(self._threads)
        if not started:
            self._engine.dispose()  # nothing was ever connected: no I/O
            return
        await asyncio.gather(*(self._hop(_LAST, self._retire) for _ in range(started)))

    async def _hop(
        self,
        priority: int,
        fn: Callable[..., R],
        *args: object,
        write_body: Callable[[Connection], R] | None = None,
    ) -> R:
        # The caller's context goes along (as `asyncio.to_thread` does), so a local tool running
        # in the transaction sees the turn's context variables (logging, tracing).
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[R] = loop.create_future()
        call = functools.partial(context.run, fn, *args)
        job = _Job(priority, loop, waiter, call, context, write_body)
        self._lanes[0 if priority == _URGENT else 1].append(job)
        if priority != _LAST:
            self._find_thread()
        self._wake.put(None)
        # Cancelling the await cancels a job that has not started; one that has runs to its end.
        return await waiter

    def _find_thread(self) -> None:
        """Promise the new job an idle thread, or start one while fewer than `threads` run;
        otherwise it waits for the first thread to finish."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                return
            if len(self._threads) >= self._max_threads:
                return
            thread = threading.Thread(
                target=self._serve, name=f"{self._name}-{len(self._threads)}", daemon=True
            )
            self._threads.append(thread)
        # `Thread.start` returns only once the new thread runs, and a busy machine may take a
        # while to run it: started from the event loop, that held the loop (130 ms, beside two
        # CPU hogs). A throwaway low-level thread waits for it instead; the job is queued.
        _thread.start_new_thread(self._start, (thread,))

    def _start(self, thread: threading.Thread) -> None:
        try:
            thread.start()
        except BaseException:
            # No thread after all (the process is out of them): the next job tries again.
            with self._lock:
                self._threads.remove(thread)
            raise

    def _serve(self) -> None:
        urgent, background = self._lanes
        while True:
            self._wake.get()
            with self._lock:
                if not urgent and not background:
                    continue  # this token's job went out with an earlier group
                job = urgent.popleft() if urgent else background.popleft()
                group = self._more_writes(job)
            if group:
                outcomes = self._commit_group([job, *group])
            elif job.starts():
                try:
                    outcomes = [(job, True, job.call())]
                except BaseException as exc:
                    outcomes = [(job, False, exc)]
            else:
                outcomes = []
            if job.priority != _LAST:
                # Idle before the callers hear back: a caller's next transaction then finds
                # this thread free instead of starting another (and, on PostgreSQL, opening
                # another connection).
                with self._lock:
                    self._idle += 1
            _settle(outcomes)
            if job.priority == _LAST:
                return

    def _more_writes(self, first: _Job) -> list[_Job]:
        """The write transactions queued behind `first` (a write), urgent ones first, to commit
        with it; empty unless group commit is on. Called holding the lock."""
        if self._group_writes < 2 or first.write_body is None:
            return []
        taken: list[_Job] = []
        for lane in self._lanes:
            while lane and lane[0].write_body is not None and len(taken) + 1 < self._group_writes:
                taken.append(lane.popleft())
        return taken

    def _commit_group(self, jobs: list[_Job]) -> list[_Outcome]:
        """Group commit: one transaction, one fsync, for write transactions that were waiting
        anyway (SQLite has one writer). Each body runs in a savepoint of its own, so one that
        raises (a lost lease, a local tool's error, a duplicate step) is rolled back alone and
        gets its exception; the others commit together, and none hears back before the group's
        COMMIT is durable. If that COMMIT fails, every body in the group gets the error, as each
        would have alone.

        The savepoints are plain SQL on the driver's connection, not SQLAlchemy's
        `begin_nested`, which cost more than a step's own statements (bench/README.md). A
        body's own `begin_nested` nests inside (its savepoints have other names)."""
        running = [job for job in jobs if job.starts()]
        outcomes: list[_Outcome] = []
        conn: Connection | None = None
        try:
            conn = self._connection()
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                cursor = conn.connection.cursor()
                try:
                    for job in running:
                        assert job.write_body is not None
                        assert job.context is not None
                        cursor.execute(_SAVEPOINT)
                        try:
                            value = job.context.run(job.write_body, conn)
                        except Exception as exc:
                            if conn.invalidated or is_unavailable(exc):
                                raise  # the database, not this body: the whole group fails
                            cursor.execute(_ROLLBACK_TO)
                            outcomes.append((job, False, exc))
                        else:
                            outcomes.append((job, True, value))
                        cursor.execute(_RELEASE)
                finally:
                    cursor.close()
        except BaseException as exc:
            error: BaseException = exc
            lost = conn is not None and conn.invalidated
            plain = isinstance(exc, Exception) and not isinstance(exc, StoreUnavailableError)
            if plain and (is_unavailable(exc) or lost):
                error = self._unavailable(exc)
            if isinstance(error, StoreUnavailableError):
                self._drop_kept()
            return [(job, False, error) for job in running]
        finally:
            self._local.used_at = time.monotonic()
        return outcomes

    def _connection(self) -> Connection:
        kept: Connection | None = getattr(self._local, "connection", None)
        if kept is not None and not kept.closed and not kept.invalidated and self._stale(kept):
            kept.invalidate()
        if kept is None or kept.closed or kept.invalidated:
            if kept is not None:
                kept.close()
            kept = self._local.connection = self._engine.connect()
        return kept

    def _stale(self, kept: Connection) -> bool:
        """Whether the kept connection sat idle past `ping_after_idle` and fails a ping."""
        if self._ping_after_idle is None:
            return False
        if time.monotonic() - getattr(self._local, "used_at", 0.0) < self._ping_after_idle:
            return False
        dbapi_connection = kept.connection.dbapi_connection
        if dbapi_connection is None:
            return True
        try:
            return not self._engine.dialect.do_ping(dbapi_connection)
        except Exception:
            return True

    def _transaction(self, body: Callable[[Connection], R], write: bool) -> R:
        try:
            if not self._keep_connection:
                with self._engine.connect() as conn:
                    return self._run(conn, body, write)
            try:
                return self._run(self._connection(), body, write)
            finally:
                self._local.used_at = time.monotonic()
        except StoreUnavailableError:
            self._drop_kept()
            raise
        except Exception as exc:
            if is_unavailable(exc):
                self._drop_kept()
                raise self._unavailable(exc) from exc
            raise

    def _drop_kept(self) -> None:
        """After the database was found unavailable, never reuse the thread's kept connection:
        a statement run on the driver's own cursor (`storage.sql.driver`) fails without
        SQLAlchemy seeing it, so SQLAlchemy may not have invalidated it."""
        kept: Connection | None = getattr(self._local, "connection", None)
        if kept is not None and not kept.invalidated:
            with contextlib.suppress(Exception):
                kept.invalidate()

    def _run(self, conn: Connection, body: Callable[[Connection], R], write: bool) -> R:
        try:
            return _run(conn, body, write)
        except Exception as exc:
            # The connection was lost on the way (SQLAlchemy invalidated it): whatever the body
            # made of that, a local tool's own error included, the transaction did not commit.
            if conn.invalidated and not isinstance(exc, StoreUnavailableError):
                raise self._unavailable(exc) from exc
            raise

    def _unavailable(self, exc: BaseException) -> StoreUnavailableError:
        return unavailable_error(self._database, exc, password=self._engine.url.password)

    def _retire(self) -> None:
        """This thread's last job: close what it kept; the last thread out disposes."""
        kept = getattr(self._local, "connection", None)
        if kept is not None:
            self._local.connection = None
            kept.close()
        with self._lock:
            self._retired += 1
            last = self._retired == len(self._threads)
        if last:
            self._engine.dispose()


def _run(conn: Connection, body: Callable[[Connection], R], write: bool) -> R:
    # In place on a Connection: read by the "begin" hook that picks BEGIN or BEGIN IMMEDIATE.
    conn.execution_options(**{WRITE_OPTION: write})
    if write:
        with conn.begin():
            return body(conn)
    transaction = conn.begin()
    try:
        return body(conn)
    finally:
        transaction.rollback()


_SAVEPOINT = "SAVEPOINT storage_group_body"
_ROLLBACK_TO = "ROLLBACK TO storage_group_body"
_RELEASE = "RELEASE storage_group_body"


class _Job:
    """One transaction on its way to a thread, and the future its caller awaits on the loop."""

    __slots__ = ("call", "context", "loop", "priority", "waiter", "write_body")

    def __init__(
        self,
        priority: int,
        loop: asyncio.AbstractEventLoop,
        waiter: asyncio.Future[Any],
        call: Callable[[], Any],
        context: contextvars.Context | None = None,
        write_body: Callable[[Connection], Any] | None = None,
    ) -> None:
        self.priority = priority
        self.loop = loop
        self.waiter = waiter
        self.call = call
        self.context = context
        self.write_body = write_body
        """Set for a write transaction: what group commit runs in a savepoint."""

    def starts(self) -> bool:
        """False if its caller stopped waiting before a thread took it: then it never runs."""
        return not self.waiter.cancelled()


_Outcome = tuple[_Job, bool, Any]
"""A job, whether its body returned, and what it returned or raised."""


def _settle(outcomes: list[_Outcome]) -> None:
    """Hand the outcomes to their loops, one wake-up per loop for a whole group: each wake-up is
    a write to the loop's self-pipe, a system call the store's thread makes while every session
    waits on it."""
    by_loop: dict[asyncio.AbstractEventLoop, list[_Outcome]] = {}
    for outcome in outcomes:
        by_loop.setdefault(outcome[0].loop, []).append(outcome)
    for loop, mine in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody is waiting any more
            loop.call_soon_threadsafe(_deliver, mine)


def _deliver(outcomes: list[_Outcome]) -> None:
    """On the loop: set each waiter that is still waited on."""
    for job, ok, value in outcomes:
        if job.waiter.done():
            continue  # cancelled while its body ran; the body's outcome goes nowhere
        if ok:
            job.waiter.set_result(value)
        else:
            job.waiter.set_exception(value)
