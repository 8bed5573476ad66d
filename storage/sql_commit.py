"""The hot path of `SqlStore`: one step's commit inside an open write transaction.

A commit is a handful of statements whatever the transcript's length: the fence UPDATE (which
checks the lease, extends it and reserves event seqs, all under the session row's lock), then one
INSERT per table touched and at most one UPDATE of the turn. Nothing here reads the transcript.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy import Table, insert, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.errors import FatalToolError, LeaseLostError, StepConflictError
from agent.seams import Lease, SessionStatus, StepCommit, StoreHandle, TurnStatus
from storage.records import EncodedCommit
from storage.sql_schema import events, messages, sessions, steps, turns

R = TypeVar("R")


class ConnectionHandle:
    """`ctx.store` for a local tool: the step's own connection, valid only while the tool runs."""

    def __init__(self, connection: Connection) -> None:
        self._connection: Connection | None = connection

    def unwrap(self) -> Connection:
        if self._connection is None:
            raise FatalToolError("the store handle was used after its step's transaction ended")
        return self._connection

    def close(self) -> None:
        self._connection = None


def run_local(connection: Connection, run: Callable[[StoreHandle], R]) -> R:
    """Run a sync local tool on the step's connection (called through `AsyncConnection.run_sync`).

    The tool's writes are only exactly-once if they commit with the step, so a tool that ends the
    transaction itself is a deployment mistake: fatal, and the step is not committed.
    """
    transaction = connection.get_transaction()
    handle = ConnectionHandle(connection)
    try:
        result = run(handle)
    finally:
        handle.close()
    if connection.get_transaction() is not transaction or not connection.in_transaction():
        raise FatalToolError(
            "a local tool committed or rolled back the step's transaction; it must leave that "
            "to the step (use connection.begin_nested() for a savepoint)"
        )
    return result


def held(lease: Lease) -> tuple[Any, ...]:
    """WHERE clauses matching the session row only while `lease` is its current lease."""
    return (
        sessions.c.key == lease.session,
        sessions.c.lease_owner == lease.owner,
        sessions.c.lease_epoch == lease.epoch,
    )


async def fence(
    conn: AsyncConnection,
    lease: Lease,
    ttl: float,
    now: float,
    commit: StepCommit | None = None,
    encoded: EncodedCommit | None = None,
) -> int:
    """Check the lease and reserve the event seqs in one UPDATE; returns the last seq reserved."""
    values: dict[str, Any] = {"lease_expires_at": now + ttl, "updated_at": now}
    if commit is not None and encoded is not None:
        if commit.events:
            values["event_seq"] = sessions.c.event_seq + len(commit.events)
        if commit.session_status is not None:
            values["status"] = SessionStatus(commit.session_status).value
        if commit.set_pending:
            values["pending"] = encoded.pending
    stmt = update(sessions).where(*held(lease)).values(values).returning(sessions.c.event_seq)
    last_seq = (await conn.execute(stmt)).scalar_one_or_none()
    if last_seq is None:
        raise LeaseLostError(
            f"lease on session {lease.session!r} (owner {lease.owner!r}, epoch {lease.epoch}) "
            "is no longer held"
        )
    return int(last_seq)


async def write_rows(
    conn: AsyncConnection, session: str, commit: StepCommit, encoded: EncodedCommit, last_seq: int
) -> None:
    try:
        if commit.step_id is not None:
            await conn.execute(
                insert(steps).values(
                    session_key=session,
                    turn_id=commit.turn_id,
                    step_id=commit.step_id,
                    value=encoded.step_value,
                )
            )
        message_rows = [
            {
                "session_key": session,
                "idx": m.idx,
                "turn_id": m.turn_id,
                "role": m.role,
                "body": m.body,
            }
            for m in encoded.messages
        ]
        await _insert_many(conn, messages, message_rows)
        first_seq = last_seq - len(encoded.events) + 1
        event_rows = [
            {
                "session_key": session,
                "seq": first_seq + i,
                "turn_id": e.turn_id,
                "type": e.type,
                "body": e.body,
            }
            for i, e in enumerate(encoded.events)
        ]
        await _insert_many(conn, events, event_rows)
    except IntegrityError as err:
        raise StepConflictError(
            f"session {session!r} already has step {commit.step_id!r} or one of message indexes "
            f"{[m.idx for m in encoded.messages]}"
        ) from err
    turn_values: dict[str, Any] = {}
    if commit.turn_status is not None:
        turn_values["status"] = TurnStatus(commit.turn_status).value
    if encoded.turn_result is not None:
        turn_values["result"] = encoded.turn_result
    if encoded.cancel_reason is not None:
        turn_values["cancel_reason"] = encoded.cancel_reason
    if turn_values:
        await conn.execute(
            update(turns)
            .where(turns.c.session_key == session, turns.c.turn_id == commit.turn_id)
            .values(turn_values)
        )


async def _insert_many(
    conn: AsyncConnection, table: Table, rows: Sequence[Mapping[str, Any]]
) -> None:
    """One driver call per table: a cached single-row INSERT run as an executemany.

    A literal multi-row VALUES would be recompiled on every commit (its SQL depends on the row
    count, so SQLAlchemy cannot cache it), which costs more than the round trip it saves; the
    driver's executemany reuses one prepared statement instead (psycopg pipelines it).
    """
    if rows:
        await conn.execute(insert(table), list(rows))
