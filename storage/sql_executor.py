"""How a transaction body reaches the database: one hop per transaction, whatever the driver.

Every `SqlStore` method is a plain sync function `(Connection) -> result` (its "body"), so the SQL
is written once. An executor runs a body in one transaction:

- `ThreadExecutor` (SQLite): the sync engine on one dedicated worker thread per store. A body runs
  there whole, so a step commit costs one hand-off between the event loop and the thread. An
  async SQLite driver hands each cursor call to its thread instead (about twenty per commit),
  and those hand-offs, not SQLite, were most of a step's cost. One thread also means one
  connection: SQLite has a single writer anyway, and the store's writes queue up in-process
  instead of contending for the file lock.
- `AsyncExecutor` (PostgreSQL): SQLAlchemy's async engine on psycopg's native asyncio, the body
  run through `AsyncConnection.run_sync`, which drives the same sync code without a thread.

Write transactions are begun with the `WRITE_OPTION` execution option, which SQLite turns into
BEGIN IMMEDIATE (see `storage.sql_dialects`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.ext.asyncio import AsyncEngine

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
    """A sync engine confined to one worker thread, which keeps one connection open.

    Every connection is made, used and closed on that thread (pysqlite connections refuse to
    cross threads, and that is the check we want). Keeping the connection, rather than checking
    one out of the pool per transaction, changes nothing SQLite sees (a one-thread pool hands out
    the same connection every time) and saves the pool's bookkeeping on every step.

    The thread takes urgent transactions first, then the rest in arrival order. In a process that
    runs turns, the turns' commits (each with its fsync) kept this thread busy most of the time
    under a burst, and an event's ack waited behind all the commits queued before it (200
    events/s with turns running: p50 30 ms, p99 110-170 ms, nearly all of it in this queue).
    """

    def __init__(self, engine: Engine, *, name: str = "sql-store") -> None:
        self._engine = engine
        # Two lanes and a wake-up token per job: all of it C-implemented and lock-free from
        # Python's side (a `queue.PriorityQueue` added about 20 µs per hop with its Condition).
        self._lanes: tuple[collections.deque[_Job], collections.deque[_Job]] = (
            collections.deque(),
            collections.deque(),
        )
        self._wake: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self._connection: Connection | None = None
        """Touched only on the worker thread."""

    async def read(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        return await self._hop(_URGENT if urgent else _BACKGROUND, self._transaction, body, False)

    async def write(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        return await self._hop(_URGENT if urgent else _BACKGROUND, self._transaction, body, True)

    async def close(self) -> None:
        """After everything already queued; the thread ends with it."""
        await self._hop(_LAST, self._dispose)

    async def _hop(self, priority: int, fn: Callable[..., R], *args: object) -> R:
        # The caller's context goes along (as `asyncio.to_thread` does), so a local tool running
        # in the transaction sees the turn's context variables (logging, tracing).
        context = contextvars.copy_context()
        future: concurrent.futures.Future[R] = concurrent.futures.Future()
        call = functools.partial(context.run, fn, *args)
        self._lanes[0 if priority == _URGENT else 1].append(_Job(priority, future, call))
        self._wake.put(None)
        # Cancelling the await cancels a job that has not started; one that has runs to its end.
        return await asyncio.wrap_future(future)

    def _serve(self) -> None:
        urgent, background = self._lanes
        while True:
            self._wake.get()
            job = urgent.popleft() if urgent else background.popleft()
            if job.future.set_running_or_notify_cancel():
                try:
                    result = job.call()
                except BaseException as exc:
                    job.future.set_exception(exc)
                else:
                    job.future.set_result(result)
            if job.priority == _LAST:
                return

    def _transaction(self, body: Callable[[Connection], R], write: bool) -> R:
        conn = self._connection
        if conn is None or conn.closed or conn.invalidated:
            if conn is not None:
                conn.close()
            conn = self._connection = self._engine.connect()
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

    def _dispose(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._engine.dispose()


@dataclass(frozen=True)
class _Job:
    priority: int
    future: concurrent.futures.Future[Any]
    call: Callable[[], Any]


class AsyncExecutor:
    """An async engine; a body runs on the event loop's own thread through `run_sync`.

    `urgent` changes nothing here: there is no queue of this executor's own (each transaction
    takes a pooled connection, and PostgreSQL runs them side by side)."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})

    async def read(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        async with self._engine.connect() as conn:
            return await conn.run_sync(body)

    async def write(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        async with self._writer.begin() as conn:
            return await conn.run_sync(body)

    async def close(self) -> None:
        await self._engine.dispose()
