"""The suite's own PostgreSQL databases are dropped after the run by a detached process, and only
they are: a name this run made, or a leftover of an earlier run (our prefix, older than a run
can last, nobody connected); never a database this run still uses or anyone else's."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy.engine import make_url

from tests.support import pg_databases

pytestmark = pytest.mark.timeout(600)
"""A drop waits on a checkpoint; on a busy server that takes minutes (see `pg_databases`)."""


def _conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _names(conninfo: str) -> set[str]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows: list[Any] = conn.execute("SELECT datname FROM pg_database").fetchall()
    return {str(row[0]) for row in rows}


def _create(conninfo: str, name: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def test_only_names_of_ours_parse_as_ours() -> None:
    made = pg_databases.new_name("empty")
    assert pg_databases.created_at(made) == pytest.approx(time.time(), abs=60)
    for foreign in ("test", "postgres", "bot_bench_1_ab", "bot_test_", "bot_test_abc_12"):
        assert pg_databases.created_at(foreign) is None


async def test_the_late_drop_takes_what_it_is_given_and_stale_leftovers_only(
    postgres_database: str, scratch_databases: list[str]
) -> None:
    conninfo = _conninfo(postgres_database)
    given = pg_databases.new_name("given")
    kept = pg_databases.new_name("kept")
    old = int(time.time() - pg_databases.STALE_AFTER - 60)
    leftover = f"{pg_databases.PREFIX}{old}_{'ab' * 6}_left"
    for name in (given, kept, leftover):
        await asyncio.to_thread(_create, conninfo, name)
    scratch_databases.append(kept)  # this run's own: dropped after it, like the run's database

    # Off the loop: forking this test process can take half a second on a busy machine.
    await asyncio.to_thread(pg_databases.drop_later, conninfo, [given])

    deadline = time.monotonic() + 540
    while True:
        present = await asyncio.to_thread(_names, conninfo)
        if given not in present and leftover not in present:
            break
        assert time.monotonic() < deadline, "the detached drop never happened"
        await asyncio.sleep(0.5)
    assert kept in present, "a database of this run that it was not told to drop was dropped"
    assert make_url(postgres_database).database in present
