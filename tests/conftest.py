"""Shared fixtures: real databases for the stores, set up once per run and emptied per test.

- PostgreSQL: one database per test run (`bot_test_<time>_<random>`), migrated once, dropped
  after the run by a detached process (`tests.support.pg_databases`: a drop waits on a checkpoint,
  which a busy server is slow to finish, so no teardown waits for one); every test that uses it
  starts with its tables truncated (every table the migrations made, so a later revision's
  tables are emptied too). The server comes from `BOT_TEST_POSTGRES_URL` (default
  `postgresql://postgres@127.0.0.1:5432/test`). If it cannot be reached the test fails, saying
  so; set `BOT_TEST_SKIP_POSTGRES=1` to skip instead, except where `BOT_TEST_REQUIRE_SERVICES=1`
  (CI): there a missing server always fails, so a green run cannot hide skipped databases.
- SQLite: a fresh, migrated file per test, copied from a template migrated once per run.
- `store`: the same test against `memory`, `sqlite` and `postgres`.

Migrations are async but some fixtures here are sync (an async fixture cannot request another
async fixture lazily), so they run on a private event loop in a worker thread. A fixture that
picks its database lazily (`request.getfixturevalue`) is sync too: from an async one, the
database's setup would run on the test's event loop and block it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Coroutine, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from agent import SessionStore
from storage import MemoryStore, SqlStore, upgrade_database
from storage.sql.schema import STORE_TABLES
from tests.support import pg_databases
from tests.support.service_policy import service_unavailable

T = TypeVar("T")

pytest_plugins = (
    "tests.support.loop_watch",
    "tests.support.anthropic_fixtures",
    "tests.support.redis_fixtures",
    "tests.support.private_services",
    "tests.support.sandbox_artifacts",
)
"""`loop_watch`: fails a test that blocks its event loop; autouse in `integration` and `bot`.
`redis_fixtures`: the shared Redis (`redis_url`) and a namespace per test (`redis_prefix`).
`private_services`: `private_postgres` / `private_redis`, servers a test may restart.
`sandbox_artifacts`: where the sandbox page's screenshots go, named in the run's summary."""

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
POSTGRES_FIXTURES = frozenset({"postgres_url", "postgres_database"})


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even while the caller's loop is running."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take a PostgreSQL fixture directly are marked `postgres` without saying so.
    Tests marked `long` run first: in a parallel run one of them started last would keep the
    run waiting for it alone (xdist hands each worker a run of the list, so they all go to the
    first worker, and the others take its remaining tests off its queue meanwhile)."""
    for item in items:
        if POSTGRES_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.postgres)
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


# -- PostgreSQL -----------------------------------------------------------------------------


def _server_conninfo() -> str:
    return os.environ.get("BOT_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)


def _connect_server() -> psycopg.Connection[Any]:
    conninfo = _server_conninfo()
    try:
        return psycopg.connect(conninfo, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as err:
        reason = str(err).strip()
    message = (
        f"PostgreSQL is not reachable at {conninfo}: {reason}\n"
        "Start it, point BOT_TEST_POSTGRES_URL at a server, or set BOT_TEST_SKIP_POSTGRES=1 to "
        "skip the PostgreSQL tests."
    )
    service_unavailable(message, "BOT_TEST_SKIP_POSTGRES")


@pytest.fixture(scope="session")
def scratch_databases() -> list[str]:
    """Names of the other PostgreSQL databases this run made (`pg_databases.new_name`); dropped
    with the run's own, after it."""
    return []


@pytest.fixture(scope="session")
def postgres_database(scratch_databases: list[str]) -> Iterator[str]:
    """A migrated database of its own for this test run; yields its SQLAlchemy URL."""
    name = pg_databases.new_name()
    with _connect_server() as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = (
        make_url(_server_conninfo())
        .set(drivername="postgresql+psycopg", database=name)
        .render_as_string(hide_password=False)
    )
    try:
        run_async(upgrade_database(url))
        yield url
    finally:
        pg_databases.drop_later(_server_conninfo(), [name, *scratch_databases])


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """The run's PostgreSQL database, its tables emptied before this test."""
    conninfo = (
        make_url(postgres_database)
        .set(drivername="postgresql")
        .render_as_string(hide_password=False)
    )
    with psycopg.connect(conninfo, autocommit=True) as conn:
        names = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() "
                "AND tablename <> 'alembic_version'"
            )
        ]
        assert {table.name for table in STORE_TABLES} <= set(names), "store tables are missing"
        tables = sql.SQL(", ").join(sql.Identifier(name) for name in sorted(names))
        conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY").format(tables))
    return postgres_database


# -- SQLite ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "bot.db"
    run_async(upgrade_database(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture
def sqlite_url(_sqlite_template: Path, tmp_path: Path) -> str:
    """A fresh, migrated SQLite file for this test (other processes may open it too)."""
    path = tmp_path / "bot.db"
    for suffix in ("", "-wal"):
        source = _sqlite_template.with_name(_sqlite_template.name + suffix)
        if source.exists():
            shutil.copyfile(source, path.with_name(path.name + suffix))
    return f"sqlite+aiosqlite:///{path}"


# -- every store ----------------------------------------------------------------------------


@pytest.fixture(
    params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)],
    ids=["memory", "sqlite", "postgres"],
)
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The database behind `store`, None for memory. A sync fixture: the database's own setup
    (sync psycopg, the run's migration on first use) runs while the test's event loop is
    stopped, whereas requested from inside an async fixture it would block that loop."""
    if request.param == "memory":
        return None
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
async def store(store_url: str | None) -> AsyncIterator[SessionStore]:
    """An open, empty store of each kind; closed after the test."""
    opened: SessionStore = MemoryStore() if store_url is None else await SqlStore.open(store_url)
    try:
        yield opened
    finally:
        await opened.close()
