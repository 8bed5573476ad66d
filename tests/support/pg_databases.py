"""The test run's own PostgreSQL databases: named so they can be told apart, dropped off the clock.

`DROP DATABASE` makes the server checkpoint before it returns, and a busy server (load 13 was
seen here) takes longer than any test's timeout to finish one: a teardown that waits for the drop
fails a run whose tests all passed. So no test waits for one. The names created during a run are
handed, at its end, to a detached process (`python -m tests.support.pg_databases`) that drops them
whenever the server gets to it, and that also drops what an earlier run left behind (one killed
before its end, say): databases with this module's prefix, older than `STALE_AFTER`, that nobody
is connected to. Only names this module made are ever dropped.

A name is `bot_test_<unix time>_<random>`: the time is what tells a leftover from a database a
run still uses.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

PREFIX = "bot_test_"
STALE_AFTER = 6 * 3600.0
"""A database of ours this old is a leftover: no run of the suite takes six hours."""
_NAME = re.compile(rf"^{PREFIX}(\d+)_[0-9a-f]+(?:_[a-z0-9_]+)?$")
ROOT = Path(__file__).resolve().parents[2]


def new_name(suffix: str = "") -> str:
    """A database name of this run's (`suffix`: what it is for, letters, digits and `_`)."""
    name = f"{PREFIX}{int(time.time())}_{secrets.token_hex(6)}"
    return f"{name}_{suffix}" if suffix else name


def created_at(name: str) -> float | None:
    """When a database with one of our names was made; None for any other name."""
    match = _NAME.match(name)
    return float(match.group(1)) if match else None


def drop_later(conninfo: str, names: Iterable[str]) -> None:
    """Drop `names` (and stale leftovers) in a detached process; returns at once.

    The process outlives this one if it must (its own session, no pipe held), so neither a test
    nor the run's end waits for the server's checkpoint."""
    wanted = [name for name in names if created_at(name) is not None]
    subprocess.Popen(
        [sys.executable, "-m", "tests.support.pg_databases", conninfo, *wanted],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def stale(conn: psycopg.Connection[Any], now: float) -> list[str]:
    """Our databases older than `STALE_AFTER` with no connection open to them."""
    rows = conn.execute(
        "SELECT d.datname FROM pg_database d WHERE d.datname LIKE %s AND NOT EXISTS "
        "(SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)",
        (PREFIX.replace("_", r"\_") + "%",),
    ).fetchall()
    found = []
    for (name,) in rows:
        made = created_at(name)
        if made is not None and now - made > STALE_AFTER:
            found.append(name)
    return found


def drop(conninfo: str, names: list[str]) -> None:
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as admin:
        for name in [*names, *stale(admin, time.time())]:
            if created_at(name) is None:
                continue
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


if __name__ == "__main__":
    drop(sys.argv[1], sys.argv[2:])
