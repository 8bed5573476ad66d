"""The raw floor: the same rows per step, one transaction each, straight through the driver.

What the engine adds on top of this is its price: pydantic encoding, SQLAlchemy, the async
drivers' thread or socket hand-offs, the turn loop and the event hub. The floor keeps everything
the durability contract needs (the fence UPDATE ... RETURNING that checks the lease and reserves
event seqs, BEGIN IMMEDIATE on SQLite, one commit per step with the same journal and synchronous
settings) and nothing else. Statements are the ones SqlStore issues, written out by hand.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import psycopg

from bench.timing import TurnTiming, from_marks
from bench.workload import StepRows, turn_input_json, turn_plan

FLOOR_OWNER = "floor-worker"
SYNCHRONOUS_NAMES = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
LEASE_TTL = 30.0

ENQUEUE = (
    "INSERT INTO turns (session_key, turn_id, status, input, created_at) "
    "VALUES (?, ?, 'queued', ?, ?)"
)
ACQUIRE = (
    "UPDATE sessions SET lease_owner = ?, lease_epoch = lease_epoch + 1, lease_expires_at = ?, "
    "updated_at = ? WHERE key = ? AND (lease_owner IS NULL OR lease_expires_at < ?) "
    "RETURNING lease_epoch"
)
RELEASE = (
    "UPDATE sessions SET lease_owner = NULL, lease_expires_at = 0 "
    "WHERE key = ? AND lease_owner = ? AND lease_epoch = ?"
)
FENCE = (
    "UPDATE sessions SET lease_expires_at = ?, updated_at = ?, event_seq = event_seq + ? "
    "WHERE key = ? AND lease_owner = ? AND lease_epoch = ? RETURNING event_seq"
)
FENCE_STATUS = (
    "UPDATE sessions SET lease_expires_at = ?, updated_at = ?, event_seq = event_seq + ?, "
    "status = ? WHERE key = ? AND lease_owner = ? AND lease_epoch = ? RETURNING event_seq"
)
INSERT_STEP = "INSERT INTO steps (session_key, turn_id, step_id, value) VALUES (?, ?, ?, ?)"
INSERT_MESSAGE = (
    "INSERT INTO messages (session_key, idx, turn_id, role, body) VALUES (?, ?, ?, ?, ?)"
)
INSERT_EVENT = "INSERT INTO events (session_key, seq, turn_id, type, body) VALUES (?, ?, ?, ?, ?)"
UPDATE_TURN = "UPDATE turns SET status = ? WHERE session_key = ? AND turn_id = ?"
UPDATE_TURN_RESULT = "UPDATE turns SET status = ?, result = ? WHERE session_key = ? AND turn_id = ?"

FOOTPRINT = (
    "SELECT (SELECT count(*) FROM messages WHERE session_key = :session AND turn_id = :turn)"
    " + (SELECT count(*) FROM events WHERE session_key = :session AND turn_id = :turn)"
    " + (SELECT count(*) FROM steps WHERE session_key = :session AND turn_id = :turn),"
    " (SELECT coalesce(sum(length(body)), 0) FROM messages"
    "  WHERE session_key = :session AND turn_id = :turn)"
    " + (SELECT coalesce(sum(length(body)), 0) FROM events"
    "  WHERE session_key = :session AND turn_id = :turn)"
    " + (SELECT coalesce(sum(length(value)), 0) FROM steps"
    "  WHERE session_key = :session AND turn_id = :turn)"
)
"""Rows and JSON characters one turn wrote (named parameters, so both drivers and SQLAlchemy
can run it): the check that the floor writes what the engine writes."""


class _Executor(Protocol):
    """What sqlite3.Connection and psycopg.Cursor have in common."""

    def execute(self, sql: Any, params: Sequence[Any] = ..., /) -> Any: ...

    def executemany(self, sql: Any, params: Sequence[Sequence[Any]], /) -> Any: ...


class RawFloor:
    """One connection; subclasses say how a write transaction begins and ends."""

    placeholder = "?"

    def __init__(self, executor: _Executor) -> None:
        self._x = executor
        self._sql = {
            name: sql.replace("?", self.placeholder)
            for name, sql in {
                "enqueue": ENQUEUE,
                "acquire": ACQUIRE,
                "release": RELEASE,
                "fence": FENCE,
                "fence_status": FENCE_STATUS,
                "step": INSERT_STEP,
                "message": INSERT_MESSAGE,
                "event": INSERT_EVENT,
                "turn": UPDATE_TURN,
                "turn_result": UPDATE_TURN_RESULT,
            }.items()
        }

    def begin(self) -> None:
        raise NotImplementedError

    def commit(self) -> None:
        raise NotImplementedError

    def rollback(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def end_read(self) -> None:
        """Close whatever transaction a plain read opened (none on autocommit sqlite3)."""

    def footprint(self, session: str, turn_id: str) -> tuple[int, int]:
        named = {"session": session, "turn": turn_id}
        query = FOOTPRINT
        if self.placeholder == "%s":
            query = query.replace(":session", "%(session)s").replace(":turn", "%(turn)s")
        row = self._x.execute(query, named).fetchone()  # type: ignore[arg-type]
        self.end_read()
        return int(row[0]), int(row[1])

    def _one(self, name: str, params: Sequence[Any]) -> Any:
        cursor = self._x.execute(self._sql[name], params)
        row = cursor.fetchone() if cursor.description is not None else None
        return None if row is None else row[0]

    def _transaction(self, name: str, params: Sequence[Any]) -> Any:
        self.begin()
        try:
            value = self._one(name, params)
        except BaseException:
            self.rollback()
            raise
        self.commit()
        return value

    def run_turn(self, session: str, start: int, calls: int) -> tuple[TurnTiming, str]:
        """Queue, lease, commit every step of the workload's turn, release; returns the turn id."""
        turn_id = uuid.uuid4().hex
        plan = turn_plan(turn_id, start, calls)
        started = time.perf_counter_ns()
        now = time.time()
        self._transaction("enqueue", (session, turn_id, turn_input_json(), now))
        epoch = self._transaction("acquire", (FLOOR_OWNER, now + LEASE_TTL, now, session, now))
        if epoch is None:
            raise RuntimeError(f"floor could not lease session {session!r}")
        marks: list[int] = []
        for rows in plan:
            self.step(session, turn_id, int(epoch), rows)
            marks.append(time.perf_counter_ns())
        self._transaction("release", (session, FLOOR_OWNER, epoch))
        return from_marks(marks, started, time.perf_counter_ns()), turn_id

    def step(self, session: str, turn_id: str, epoch: int, rows: StepRows) -> None:
        """One durable step: fence, step memo, message, events, turn status; one commit."""
        x, sql = self._x, self._sql
        now = time.time()
        self.begin()
        try:
            head: tuple[Any, ...] = (now + LEASE_TTL, now, len(rows.events))
            held = (session, FLOOR_OWNER, epoch)
            if rows.session_status is None:
                row = x.execute(sql["fence"], (*head, *held)).fetchone()
            else:
                row = x.execute(sql["fence_status"], (*head, rows.session_status, *held)).fetchone()
            if row is None:
                raise RuntimeError("floor lost its lease")
            last_seq = int(row[0])
            if rows.step_id is not None:
                x.execute(sql["step"], (session, turn_id, rows.step_id, rows.step_value))
            for idx, turn, role, body in rows.messages:
                x.execute(sql["message"], (session, idx, turn, role, body))
            first = last_seq - len(rows.events) + 1
            x.executemany(
                sql["event"],
                [
                    (session, first + i, t, kind, body)
                    for i, (t, kind, body) in enumerate(rows.events)
                ],
            )
            if rows.turn_result is not None:
                x.execute(
                    sql["turn_result"], (rows.turn_status, rows.turn_result, session, turn_id)
                )
            elif rows.turn_status is not None:
                x.execute(sql["turn"], (rows.turn_status, session, turn_id))
        except BaseException:
            self.rollback()
            raise
        self.commit()


class SqliteFloor(RawFloor):
    """Plain sqlite3 in autocommit mode with explicit BEGIN IMMEDIATE, as the engine's dialect."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._conn = connect_sqlite(path, busy_timeout_ms)
        super().__init__(self._conn)

    def begin(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        self._conn.execute("ROLLBACK")

    def close(self) -> None:
        self._conn.close()


class PostgresFloor(RawFloor):
    """Plain psycopg, autocommit off: the driver begins the transaction, one commit per step."""

    placeholder = "%s"

    def __init__(self, conninfo: str) -> None:
        self._conn = psycopg.connect(conninfo, autocommit=False)
        super().__init__(self._conn.cursor())

    def begin(self) -> None:
        """psycopg opens the transaction with the first statement."""

    def commit(self) -> None:
        self._conn.commit()

    def rollback(self) -> None:
        self._conn.rollback()

    def end_read(self) -> None:
        self._conn.rollback()

    def close(self) -> None:
        self._conn.close()


def connect_sqlite(path: Path, busy_timeout_ms: int) -> sqlite3.Connection:
    """The engine's SQLite connection settings (storage.sql.dialects), on a plain connection."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn
