"""Set-up, not measured: give each benchmark session its transcript in bulk, bypassing the engine.

Both the engine's and the floor's databases get the same sessions with the same rows in the same
order, so their tables (and B-trees) are the same size when the measured steps run.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.raw_floor import connect_sqlite
from bench.workload import History

SESSION_INSERT = (
    "INSERT INTO sessions (key, status, generation, lease_owner, lease_epoch, lease_expires_at, "
    "event_seq, pending, updated_at) VALUES (?, 'idle', 0, NULL, 0, 0, ?, NULL, ?)"
)
TURN_COLUMNS = "session_key, turn_id, status, input, result, cancel_reason, created_at"
MESSAGE_COLUMNS = "session_key, idx, turn_id, role, body"
STEP_COLUMNS = "session_key, turn_id, step_id, value"
EVENT_COLUMNS = "session_key, seq, turn_id, type, body"

Sessions = Sequence[tuple[str, History]]


def populate_sqlite(path: Path, sessions: Sessions, busy_timeout_ms: int) -> None:
    """One transaction for everything, then a checkpoint so the WAL starts the run empty."""
    conn = connect_sqlite(path, busy_timeout_ms)
    try:
        conn.execute("BEGIN IMMEDIATE")
        now = time.time()
        for key, h in sessions:
            conn.execute(SESSION_INSERT, (key, len(h.events), now))
            conn.executemany(
                f"INSERT INTO turns ({TURN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(key, *row) for row in h.turns],
            )
            conn.executemany(
                f"INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                [(key, *row) for row in h.messages],
            )
            conn.executemany(
                f"INSERT INTO steps ({STEP_COLUMNS}) VALUES (?, ?, ?, ?)",
                [(key, *row) for row in h.steps],
            )
            conn.executemany(
                f"INSERT INTO events ({EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                [(key, *row) for row in h.events],
            )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def populate_postgres(conninfo: str, sessions: Sessions) -> None:
    """COPY is the fast path; ANALYZE so the planner sees the tables as they are."""
    now = time.time()
    with psycopg.connect(conninfo, autocommit=False) as conn:
        with conn.cursor() as cur:
            cur.executemany(
                SESSION_INSERT.replace("?", "%s"),
                [(key, len(h.events), now) for key, h in sessions],
            )
            for table, columns in (
                ("turns", TURN_COLUMNS),
                ("messages", MESSAGE_COLUMNS),
                ("steps", STEP_COLUMNS),
                ("events", EVENT_COLUMNS),
            ):
                with cur.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                    for key, h in sessions:
                        rows: Sequence[tuple[Any, ...]] = getattr(h, table)
                        for row in rows:
                            copy.write_row((key, *row))
        conn.commit()
        conn.autocommit = True
        conn.execute("ANALYZE")
