"""Where the benchmark runs: a pair of databases per backend, one for the engine, one for the floor.

Both are created by the project's own migrations, so the floor writes into exactly the engine's
schema (same keys, same indexes), and both are thrown away at the end.
"""

from __future__ import annotations

import secrets
import shutil
import sqlite3
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from bench.populate import Sessions, populate_postgres, populate_sqlite
from bench.raw_floor import SYNCHRONOUS_NAMES, PostgresFloor, RawFloor, SqliteFloor
from storage import upgrade_database
from storage.sql_dialects import SQLITE_BUSY_TIMEOUT_MS


class Site:
    """A backend's engine database and floor database."""

    name: str
    engine_url: str

    async def create(self) -> None:
        raise NotImplementedError

    def populate(self, sessions: Sessions) -> None:
        """Give both databases the same sessions, in the same order."""
        raise NotImplementedError

    def open_floor(self) -> RawFloor:
        raise NotImplementedError

    def floor_durability(self) -> str:
        """The floor's durability settings as the database reports them."""
        raise NotImplementedError

    def drop(self) -> None:
        raise NotImplementedError


class SqliteSite(Site):
    """Two files side by side in one fresh directory, so fsync costs the same for both."""

    name = "sqlite"

    def __init__(self, parent: Path) -> None:
        self.directory = parent / f"bench-{secrets.token_hex(4)}"
        self.engine_path = self.directory / "engine.db"
        self.floor_path = self.directory / "floor.db"
        self.engine_url = f"sqlite+aiosqlite:///{self.engine_path}"

    async def create(self) -> None:
        self.directory.mkdir(parents=True)
        await upgrade_database(self.engine_url)
        await upgrade_database(f"sqlite+aiosqlite:///{self.floor_path}")

    def populate(self, sessions: Sessions) -> None:
        for path in (self.engine_path, self.floor_path):
            populate_sqlite(path, sessions, SQLITE_BUSY_TIMEOUT_MS)

    def open_floor(self) -> RawFloor:
        return SqliteFloor(self.floor_path, SQLITE_BUSY_TIMEOUT_MS)

    def floor_durability(self) -> str:
        conn = sqlite3.connect(self.floor_path, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            sync = conn.execute("PRAGMA synchronous").fetchone()[0]
        finally:
            conn.close()
        return f"journal_mode={mode} synchronous={SYNCHRONOUS_NAMES.get(sync, sync)}"

    def drop(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class PostgresSite(Site):
    """Two fresh databases on the server, dropped (forcibly, in case a pool lingers) at the end."""

    name = "postgres"

    def __init__(self, server_url: str) -> None:
        base = make_url(server_url).set(drivername="postgresql")
        stem = f"bot_bench_{secrets.token_hex(4)}"
        self.admin = base.render_as_string(hide_password=False)
        self.engine_db, self.floor_db = f"{stem}_engine", f"{stem}_floor"
        self.engine_conninfo = base.set(database=self.engine_db).render_as_string(
            hide_password=False
        )
        self.floor_conninfo = base.set(database=self.floor_db).render_as_string(hide_password=False)
        self.engine_url = base.set(
            drivername="postgresql+psycopg", database=self.engine_db
        ).render_as_string(hide_password=False)
        self._created: list[str] = []

    async def create(self) -> None:
        with psycopg.connect(self.admin, autocommit=True, connect_timeout=5) as conn:
            for name in (self.engine_db, self.floor_db):
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                self._created.append(name)
        await upgrade_database(self.engine_url)
        await upgrade_database(
            make_url(self.engine_url).set(database=self.floor_db).render_as_string(False)
        )

    def populate(self, sessions: Sessions) -> None:
        for conninfo in (self.engine_conninfo, self.floor_conninfo):
            populate_postgres(conninfo, sessions)
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute("CHECKPOINT")

    def open_floor(self) -> RawFloor:
        return PostgresFloor(self.floor_conninfo)

    def floor_durability(self) -> str:
        with psycopg.connect(self.floor_conninfo, autocommit=True) as conn:
            settings = []
            for name in ("fsync", "synchronous_commit", "wal_sync_method"):
                row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
                settings.append(f"{name}={row[0] if row else '?'}")
        return " ".join(settings)

    def drop(self) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self._created:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        self._created.clear()
