"""A step commit on PostgreSQL as one statement: the fence and every row in one round trip.

On SQLite a statement costs the driver a microsecond; on PostgreSQL each one is a round trip and
psycopg's own Python around it, and a step is four or five of them (the fence, the step memo, the
message, the events, the turn). Under many sessions at once a worker is bound by its CPU, so
those statements were a large share of what bounded its steps per second. Data-modifying CTEs let
one statement do all of it with the same guarantees:

- every INSERT selects from the fence's `UPDATE … RETURNING`, so if the lease is not held, the
  fence returns no row, nothing is written, and the caller raises `LeaseLostError`;
- the event seqs are computed from the `event_seq` the fence reserved, in the same statement,
  under the session row's lock;
- a duplicate step, message or event fails the whole statement (and the transaction), as the
  separate INSERTs did.

Commits with confirmations, facts or expiry timers (rare: a tool asking for one, a fact
written, a park with a time limit), with a message holding a compaction (once per ~150,000
input tokens of a thread; the general path marks it), or with more
than `MOST_ROWS` rows, take the general path in `storage.sql.commit`.
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from agent.seams import Lease, SessionStatus, StepCommit
from storage.records import EncodedCommit, turn_changes
from storage.sql.driver import DriverStatement

MOST_ROWS = 16
"""Messages plus events above which a commit takes the general path: the statement is built per
row count, and a step with more (a turn cancelled with many calls unanswered) is rare."""


def fits(conn: Connection, encoded: EncodedCommit) -> bool:
    """Whether this commit can go as one statement here."""
    return (
        conn.dialect.name == "postgresql"
        and not encoded.confirmations
        and not encoded.facts
        and not encoded.timers
        and not any(m.compaction for m in encoded.messages)
        and len(encoded.messages) + len(encoded.events) <= MOST_ROWS
    )


def commit_step(
    conn: Connection,
    lease: Lease,
    commit: StepCommit,
    encoded: EncodedCommit,
    ttl: float,
    now: float,
) -> int | None:
    """The commit in one statement; the last event seq reserved, or None if the lease is gone
    (then nothing was written)."""
    params: dict[str, Any] = {
        "key": lease.session,
        "owner": lease.owner,
        "epoch": lease.epoch,
        "expires": now + ttl,
        "now": now,
        "turn": commit.turn_id,
        "n_events": len(encoded.events),
    }
    for i, m in enumerate(encoded.messages):
        params.update(
            {
                f"m{i}_idx": m.idx,
                f"m{i}_turn": m.turn_id,
                f"m{i}_role": m.role,
                f"m{i}_body": m.body,
            }
        )
    for i, e in enumerate(encoded.events):
        params.update({f"e{i}_turn": e.turn_id, f"e{i}_type": e.type, f"e{i}_body": e.body})
    if commit.session_status is not None:
        params["status"] = SessionStatus(commit.session_status).value
    if commit.set_pending:
        params["pending"] = encoded.pending
    if commit.step_id is not None:
        params["step"] = commit.step_id
        params["step_value"] = encoded.step_value
    changes = turn_changes(commit, encoded, now)
    params.update({f"t_{name}": value for name, value in changes.items()})
    statement = _statement(
        len(encoded.messages),
        len(encoded.events),
        commit.session_status is not None,
        commit.set_pending,
        commit.step_id is not None,
        tuple(changes),
    )
    row = statement.first(conn, params)
    return None if row is None else int(row[0])


@functools.lru_cache(maxsize=512)
def _statement(
    messages: int,
    events: int,
    status: bool,
    pending: bool,
    step: bool,
    turn_columns: tuple[str, ...],
) -> DriverStatement:
    """One statement per shape (rows per table, what else changes): a handful in practice, each
    prepared by psycopg once it has run a few times. Rows are written as VALUES lists rather
    than arrays to unnest: psycopg escapes every element of a text array in Python, and JSON
    bodies are full of characters to escape."""
    fence_sets = [
        "lease_expires_at = :expires",
        "updated_at = :now",
        "event_seq = event_seq + :n_events",
    ]
    if status:
        fence_sets.append("status = :status")
    if pending:
        fence_sets.append("pending = :pending")
    parts = [
        f"""fence AS (
            UPDATE sessions SET {", ".join(fence_sets)}
            WHERE key = :key AND lease_owner = :owner AND lease_epoch = :epoch
            RETURNING event_seq
        )""",
    ]
    if messages:
        rows = ", ".join(
            f"(CAST(:m{i}_idx AS INTEGER), CAST(:m{i}_turn AS TEXT), "
            f"CAST(:m{i}_role AS TEXT), CAST(:m{i}_body AS TEXT))"
            for i in range(messages)
        )
        parts.append(
            f"""new_messages AS (
            INSERT INTO messages (session_key, idx, turn_id, role, body)
            SELECT :key, m.idx, m.turn_id, m.role, m.body
            FROM fence, (VALUES {rows}) AS m(idx, turn_id, role, body)
        )"""
        )
    if events:
        rows = ", ".join(
            f"({i + 1}, CAST(:e{i}_turn AS TEXT), CAST(:e{i}_type AS TEXT), "
            f"CAST(:e{i}_body AS TEXT))"
            for i in range(events)
        )
        parts.append(
            f"""new_events AS (
            INSERT INTO events (session_key, seq, turn_id, type, body, created_at)
            SELECT :key, fence.event_seq - :n_events + e.ord, e.turn_id, e.type, e.body, :now
            FROM fence, (VALUES {rows}) AS e(ord, turn_id, type, body)
        )"""
        )
    if step:
        parts.append(
            """new_step AS (
            INSERT INTO steps (session_key, turn_id, step_id, value, created_at)
            SELECT :key, :turn, :step, :step_value, :now FROM fence
        )"""
        )
    if turn_columns:
        sets = ", ".join(f"{name} = :t_{name}" for name in turn_columns)
        parts.append(
            f"""turn_update AS (
            UPDATE turns SET {sets}
            WHERE session_key = :key AND turn_id = :turn AND EXISTS (SELECT 1 FROM fence)
        )"""
        )
    return DriverStatement(text("WITH " + ",\n".join(parts) + "\nSELECT event_seq FROM fence"))
