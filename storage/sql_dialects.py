"""What differs between SQLite and PostgreSQL, kept to a few small overrides.

`SqlStore` and the migrations are written once against SQLAlchemy Core; a `SqlDialect` decides
how an engine is made and configured and how "insert unless present" is spelled. Everything else
is the same SQL on both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Insert, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

WRITE_OPTION = "storage_write"
"""Execution option marking a transaction that will write (SQLite begins those IMMEDIATE)."""

SQLITE_BUSY_TIMEOUT_MS = 30_000


class SqlDialect:
    """The PostgreSQL-and-SQLite common ground; subclasses override only what differs."""

    name = "generic"

    def __init__(self, url: URL) -> None:
        self.url = url

    def create_engine(self) -> AsyncEngine:
        engine = create_async_engine(self.url, **self.engine_options())
        self.configure(engine)
        return engine

    def engine_options(self) -> dict[str, Any]:
        return {}

    def configure(self, engine: AsyncEngine) -> None:
        """Attach connection-level event hooks to a freshly made engine."""

    def insert_ignoring_conflict(self, table: Table, *index_elements: str) -> Insert:
        """An INSERT that does nothing when a row with the same key exists (no error raised)."""
        raise NotImplementedError


class SqliteDialect(SqlDialect):
    """SQLite through aiosqlite, made to behave like a server database under concurrency.

    The sqlite3 driver's own transaction handling starts transactions late and never for SELECT,
    which breaks atomic read-then-write and lets two processes deadlock on a lock upgrade. So the
    driver is told to keep out (`isolation_level = None`) and SQLAlchemy emits BEGIN itself, the
    recipe from SQLAlchemy's SQLite documentation. Write transactions begin IMMEDIATE: they take
    the write lock up front, so concurrent writers (other processes included) wait their turn on
    `busy_timeout` instead of failing halfway through.
    """

    name = "sqlite"

    def create_engine(self) -> AsyncEngine:
        path = self.url.database
        if path and path != ":memory:" and not path.startswith("file:"):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        return super().create_engine()

    def configure(self, engine: AsyncEngine) -> None:
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_on_begin)

    def insert_ignoring_conflict(self, table: Table, *index_elements: str) -> Insert:
        return sqlite.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))


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
    if conn.get_execution_options().get(WRITE_OPTION):
        conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        conn.exec_driver_sql("BEGIN")


class PostgresDialect(SqlDialect):
    """PostgreSQL through psycopg 3.

    READ COMMITTED is enough: every write that must be serialised per session first updates (and
    so row-locks) the session row, and the lease fence is checked by that same UPDATE.
    """

    name = "postgresql"

    def engine_options(self) -> dict[str, Any]:
        return {"pool_pre_ping": True}

    def insert_ignoring_conflict(self, table: Table, *index_elements: str) -> Insert:
        return postgresql.insert(table).on_conflict_do_nothing(index_elements=list(index_elements))


def dialect_for(url: str | URL) -> SqlDialect:
    """Pick the dialect for a URL; refuse drivers this package does not test against."""
    parsed = make_url(url)
    if parsed.drivername == "sqlite+aiosqlite":
        return SqliteDialect(parsed)
    if parsed.drivername in ("postgresql+psycopg", "postgresql+psycopg_async"):
        return PostgresDialect(parsed)
    if parsed.drivername in ("sqlite", "postgresql"):
        driver = "sqlite+aiosqlite" if parsed.drivername == "sqlite" else "postgresql+psycopg"
        return dialect_for(parsed.set(drivername=driver))
    raise ValueError(
        f"unsupported database URL scheme {parsed.drivername!r}: "
        "use sqlite+aiosqlite:///path or postgresql+psycopg://user@host/db"
    )
