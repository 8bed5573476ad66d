"""Benchmarks run on the PostgreSQL server everyone shares: each creates databases of its own and
drops only those, so pointing one at a server in use loses nobody's data."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[2]
BENCH_LOCK = 0x626F7462656E6368
"""A server-wide advisory lock key ("botbench") that the benchmark tests take in turn."""


def _conninfo(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _bench_databases(conninfo: str) -> set[str]:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        rows = conn.execute("select datname from pg_database where datname like 'bot_bench%'")
        return {str(row[0]) for row in rows}


@pytest.fixture
def someone_elses_table(postgres_database: str) -> Iterator[str]:
    """A table in the database the benchmark is pointed at, standing for its owner's data."""
    conninfo = _conninfo(postgres_database)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("create table if not exists not_the_benchmarks (v integer)")
        conn.execute("insert into not_the_benchmarks values (42)")
    try:
        yield conninfo
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("drop table if exists not_the_benchmarks")


def _run_bench(conninfo: str, *argv: str) -> None:
    env = {**os.environ, "BOT_BENCH_POSTGRES_URL": conninfo, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", *argv], cwd=ROOT, env=env, capture_output=True, timeout=240
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "argv",
    [
        ("bench.ack_latency", "--db", "postgres", "--seconds", "1", "--rate", "5"),
        ("bench", "--db", "postgres", "--sizes", "10", "--reps", "1", "--steps", "3"),
        ("bench.scaling", "--db", "shared", "--turns", "10", "--workers", "1"),
    ],
    ids=["ack_latency", "step_cost", "scaling"],
)
def test_a_benchmark_leaves_the_server_as_it_found_it(
    someone_elses_table: str, argv: tuple[str, ...]
) -> None:
    # One benchmark at a time on the server, whichever test process runs it (the suite runs in
    # parallel): another's databases appearing meanwhile would look like this one's leftovers.
    # Advisory locks are per database, and each test process has its own: so the lock is taken
    # in the server's own database, the one every test process connects to first.
    server = os.environ.get("BOT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    with psycopg.connect(server, autocommit=True) as lock:
        lock.execute("select pg_advisory_lock(%s)", (BENCH_LOCK,))
        before = _bench_databases(someone_elses_table)
        _run_bench(someone_elses_table, *argv)
        with psycopg.connect(someone_elses_table, autocommit=True) as conn:
            rows: list[Any] = conn.execute("select v from not_the_benchmarks").fetchall()
        assert rows == [(42,)], "the benchmark touched a database it did not create"
        after = _bench_databases(someone_elses_table)
        assert after == before, "its own databases were not dropped"
