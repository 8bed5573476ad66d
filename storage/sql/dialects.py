"""What differs between SQLite and PostgreSQL, kept to a few small overrides.

`SqlStore` and the migrations are written once against SQLAlchemy Core; a `SqlDialect` decides
how the engine is made, how many threads run transaction bodies on it (`storage.sql.executor`) and
whose INSERT an upsert is built on (`insert`). Everything else is the same SQL on both.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from sqlalchemy import Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import DisconnectionError

from storage.sql.errors import database_label, unavailable_error
from storage.sql.executor import WRITE_OPTION, ThreadExecutor, TransactionExecutor

if TYPE_CHECKING:  # imported by `create_engine` alone: it pulls in SQLAlchemy's ORM, which
    # nothing else of the stores uses (about a tenth of an operator command's start-up)
    from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "POSTGRES_POOL_SIZE",
    "SQLITE_BUSY_TIMEOUT_MS",
    "WRITE_OPTION",
    "PostgresDialect",
    "SqlDialect",
    "SqliteDialect",
    "UpsertInsert",
    "dialect_for",
]

SQLITE_BUSY_TIMEOUT_MS = 30_000

POSTGRES_POOL_SIZE = 10
"""Connections per PostgreSQL engine, and threads per store executor: ten, not SQLAlchemy's
five, because a web process's acks (`bot.slack.listeners.ACKS_IN_FLIGHT`) and a worker's concurrent
sessions would otherwise queue or open and close overflow connections."""
SQLITE_GROUP_COMMIT = 64
"""Write transactions queued on the SQLite store's thread that commit together (one fsync)."""

UpsertInsert: TypeAlias = postgresql.Insert | sqlite.Insert
"""An INSERT that can say what to do ON CONFLICT (`on_conflict_do_nothing`,
`on_conflict_do_update` with `excluded`): spelled alike on both databases, but SQLAlchemy builds
it from each dialect's own module."""

_SQLITE_DRIVERS = ("sqlite", "sqlite+pysqlite", "sqlite+aiosqlite")
_POSTGRES_DRIVERS = ("postgresql", "postgresql+psycopg", "postgresql+psycopg_async")


class SqlDialect:
    """The PostgreSQL-and-SQLite common ground; subclasses override only what differs."""

    name = "generic"

    one_writer = False
    """Whether the database takes one writer at a time (SQLite's file lock): a second store in
    the same process should then run on the first's thread and connection, not wait on the lock."""

    def __init__(self, url: URL, *, given: URL | None = None) -> None:
        """`url`: what the engine connects with; `given`: the URL as configured, which error
        messages name (with its password hidden)."""
        self.url = url
        self.label = database_label(given or url)

    def executor(self) -> TransactionExecutor:
        """A fresh engine behind the executor that runs this dialect's transactions."""
        raise NotImplementedError

    def create_engine(self) -> AsyncEngine:
        """An async engine with this dialect's connection setup, for code that wants to await
        its own queries (tests). The stores go through `executor()`, which keeps their bodies,
        and the tools inside them, off the event loop."""
        raise NotImplementedError

    def insert(self, table: Table) -> UpsertInsert:
        """This dialect's INSERT into `table`, for statements that say what a conflict does
        (`dialect.insert(t).on_conflict_do_nothing()`); a plain INSERT is `sqlalchemy.insert`."""
        raise NotImplementedError


class SqliteDialect(SqlDialect):
    """SQLite through the standard library's sqlite3 on one worker thread per store, made to
    behave like a server database under concurrency.

    The sqlite3 driver's own transaction handling starts transactions late and never for SELECT,
    which breaks atomic read-then-write and lets two processes deadlock on a lock upgrade. So the
    driver is told to keep out (`isolation_level = None`) and SQLAlchemy emits BEGIN itself, the
    recipe from SQLAlchemy's SQLite documentation. Write transactions begin IMMEDIATE: they take
    the write lock up front, so concurrent writers (other processes included) wait their turn on
    `busy_timeout` instead of failing halfway through.
    """

    name = "sqlite"
    one_writer = True

    def executor(self) -> TransactionExecutor:
        self._make_directory()
        engine = create_engine(self.url)
        _configure(engine)
        return ThreadExecutor(
            engine,
            name="sqlite-store",
            keep_connection=True,
            database=self.label,
            group_writes=SQLITE_GROUP_COMMIT,
        )

    def create_engine(self) -> AsyncEngine:
        from sqlalchemy.ext.asyncio import create_async_engine

        self._make_directory()
        engine = create_async_engine(self.url.set(drivername="sqlite+aiosqlite"))
        _configure(engine.sync_engine)
        return engine

    def _make_directory(self) -> None:
        path = self.url.database
        if path and path != ":memory:" and not path.startswith("file:"):
            directory = Path(path).parent
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                reason = OSError(f"cannot create the directory {directory}: {err.strerror}")
                raise unavailable_error(self.label, reason) from err

    def insert(self, table: Table) -> UpsertInsert:
        return sqlite.insert(table)


def _configure(engine: Engine) -> None:
    event.listen(engine, "connect", _sqlite_on_connect)
    event.listen(engine, "begin", _sqlite_on_begin)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        # busy_timeout first, so that switching to WAL waits out another process doing the same.
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        # FULL: in WAL mode NORMAL may lose the last commits on power loss, and a committed step
        # must never be lost (it may record an effect that already happened in the world).
        cursor.execute("PRAGMA synchronous = FULL")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    # Straight to the DBAPI cursor: this runs once per transaction, on the step's hot path.
    cursor = conn.connection.cursor()
    try:
        cursor.execute(
            "BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN"
        )
    finally:
        cursor.close()


class PostgresDialect(SqlDialect):
    """PostgreSQL through psycopg 3: the store's transactions on its sync driver, one worker
    thread per pooled connection (see `storage.sql.executor`).

    READ COMMITTED is enough: every write that must be serialised per session first updates (and
    so row-locks) the session row, and the lease fence is checked by that same UPDATE.
    """

    name = "postgresql"

    def executor(self) -> TransactionExecutor:
        engine = create_engine(self.url, pool_size=POSTGRES_POOL_SIZE)
        # Each thread keeps its connection: checking one out of the pool and back costs CPU on
        # every transaction, and the pool's reset on return (a ROLLBACK) a round trip.
        return ThreadExecutor(
            engine,
            name="postgresql-store",
            threads=POSTGRES_POOL_SIZE,
            keep_connection=True,
            ping_after_idle=PING_AFTER_IDLE,
            database=self.label,
        )

    def create_engine(self) -> AsyncEngine:
        from sqlalchemy.ext.asyncio import create_async_engine

        engine = create_async_engine(self.url, pool_size=POSTGRES_POOL_SIZE)
        _ping_when_idle(engine.sync_engine)
        return engine

    def insert(self, table: Table) -> UpsertInsert:
        return postgresql.insert(table)


def dialect_for(url: str | URL) -> SqlDialect:
    """Pick the dialect for a URL; refuse drivers this package does not test against.

    `sqlite+aiosqlite://` (the documented default) and `sqlite://` both mean the store's own
    SQLite setup on the standard library driver: the URL names a database, not a threading model.
    """
    parsed = make_url(url)
    if parsed.drivername in _SQLITE_DRIVERS:
        return SqliteDialect(parsed.set(drivername="sqlite+pysqlite"), given=parsed)
    if parsed.drivername in _POSTGRES_DRIVERS:
        return PostgresDialect(parsed.set(drivername="postgresql+psycopg"), given=parsed)
    raise ValueError(
        f"unsupported database URL scheme {parsed.drivername!r}: "
        "use sqlite:///path (or sqlite+aiosqlite:///path) or postgresql+psycopg://user@host/db"
    )


PING_AFTER_IDLE = 1.0
"""Seconds a pooled PostgreSQL connection may sit unused before it is pinged at checkout."""


def _ping_when_idle(engine: Engine) -> None:
    """Replace a stale pooled connection before use, so a server restart or failover fails no
    call, without SQLAlchemy's `pool_pre_ping` round trip on every transaction.

    A connection that was in use a moment ago is as alive as a ping would show (a restart that
    kills it now fails the calls in flight either way), so only one idle for longer than
    `PING_AFTER_IDLE` is pinged. Under load that is almost none, where pinging every checkout
    would add a round trip to every transaction, an event's ack included.
    """

    @event.listens_for(engine, "checkin")
    def _returned(dbapi_connection: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _taken(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        returned = record.info.get("returned_at")
        if returned is None or time.monotonic() - returned < PING_AFTER_IDLE:
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError("the pooled connection failed its ping") from exc
        if not alive:
            raise DisconnectionError("the pooled connection failed its ping")
