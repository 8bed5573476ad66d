"""Where the benchmark runs: a pair of databases per backend, one for the engine, one for the floor.

Both are created by the project's own migrations, so the floor writes into exactly the engine's
schema (same keys, same indexes), and both are thrown away at the end.
"""

from __future__ import annotations

import argparse
import os
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
from storage.sql.dialects import SQLITE_BUSY_TIMEOUT_MS

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
"""The server the throwaway databases are created on, unless `BOT_BENCH_POSTGRES_URL` says."""


def postgres_server_url() -> str:
    return os.environ.get("BOT_BENCH_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def add_site_arguments(parser: argparse.ArgumentParser) -> None:
    """`--db`, `--dir` and `--postgres-url`, the same in every benchmark that compares both
    databases."""
    parser.add_argument("--db", choices=("sqlite", "postgres", "all"), default="all")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("data"),
        help="where the SQLite files go; must be a real disk (tmpfs makes fsync free)",
    )
    parser.add_argument(
        "--postgres-url",
        default=postgres_server_url(),
        help="server to create the throwaway databases on (env BOT_BENCH_POSTGRES_URL)",
    )


def sites_from(args: argparse.Namespace) -> list[Site]:
    sites: list[Site] = []
    if args.db in ("sqlite", "all"):
        sites.append(SqliteSite(args.dir.resolve()))
    if args.db in ("postgres", "all"):
        sites.append(PostgresSite(args.postgres_url))
    return sites


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


class ThrowawayPostgres:
    """Databases a benchmark creates on a shared server under a random name and drops (forcibly,
    in case a pool lingers) at the end: a run never touches a database it did not create, nor
    anything server-wide."""

    def __init__(self, server_url: str) -> None:
        self._base = make_url(server_url).set(drivername="postgresql")
        self._stem = f"bot_bench_{secrets.token_hex(4)}"
        self.admin = self._base.render_as_string(hide_password=False)
        self._created: list[str] = []

    def create(self, suffix: str) -> str:
        """Create `<stem>_<suffix>` and return its psycopg conninfo URL."""
        name = f"{self._stem}_{suffix}"
        with psycopg.connect(self.admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        self._created.append(name)
        return self._base.set(database=name).render_as_string(hide_password=False)

    def drop(self) -> None:
        if not self._created:
            return
        with psycopg.connect(self.admin, autocommit=True) as conn:
            for name in self._created:
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
                )
        self._created.clear()


def sqlalchemy_url(conninfo: str) -> str:
    return make_url(conninfo).set(drivername="postgresql+psycopg").render_as_string(False)


class PostgresSite(Site):
    """Two throwaway databases on the server, one for the engine and one for the floor."""

    name = "postgres"

    def __init__(self, server_url: str) -> None:
        self._databases = ThrowawayPostgres(server_url)
        self.engine_conninfo = self.floor_conninfo = self.engine_url = ""

    async def create(self) -> None:
        self.engine_conninfo = self._databases.create("engine")
        self.floor_conninfo = self._databases.create("floor")
        self.engine_url = sqlalchemy_url(self.engine_conninfo)
        await upgrade_database(self.engine_url)
        await upgrade_database(sqlalchemy_url(self.floor_conninfo))

    def populate(self, sessions: Sessions) -> None:
        for conninfo in (self.engine_conninfo, self.floor_conninfo):
            populate_postgres(conninfo, sessions)
            # Settled visibility maps in both, so neither side pays for the other's bulk load;
            # per database, never a server-wide CHECKPOINT on a server others use.
            with psycopg.connect(conninfo, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")

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
        self._databases.drop()
