"""The hot path of `SqlStore`: the lease fence and one step's commit, as transaction bodies.

A commit is a handful of statements whatever the transcript's length: the fence UPDATE (which
checks the lease, extends it and reserves event seqs, all under the session row's lock), then one
INSERT per table touched and at most one UPDATE of the turn; on PostgreSQL, usually all of them
as one statement (`storage.sql.commit_postgres`). Nothing here reads the transcript. The leases
live here too: they are the other half of the fence. The statements run on the driver's cursor
(`storage.sql.driver`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from sqlalchemy import Table, bindparam, insert, or_, update
from sqlalchemy.engine import Connection

from agent.seams import (
    FatalToolError,
    Lease,
    LeaseLostError,
    SessionStatus,
    StepCommit,
    StepConflictError,
    StoreHandle,
)
from storage.records import (
    EncodedCommit,
    encode_commit,
    event_rows,
    message_rows,
    step_row,
    turn_changes,
)
from storage.sql import commit_postgres as sql_commit_postgres
from storage.sql.driver import DriverStatement, integrity_errors
from storage.sql.schema import (
    approval_timers,
    confirmations,
    events,
    facts,
    messages,
    sessions,
    steps,
    turns,
)

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
    """Run a sync local tool on the step's connection, inside the step's transaction.

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


# -- leases and the fence -----------------------------------------------------------------------
# The statements a step runs are built once and executed with parameters: building a Core
# statement and computing its cache key costs more than SQLite takes to run it, and a step commit
# is the one thing this store must do fast. SQLAlchemy memoizes a statement object's cache key.

_HELD = (
    sessions.c.key == bindparam("held_key"),
    sessions.c.lease_owner == bindparam("held_owner"),
    sessions.c.lease_epoch == bindparam("held_epoch"),
)
"""WHERE clauses matching the session row only while the lease in `_held(lease)` is current."""


def _held(lease: Lease) -> dict[str, Any]:
    return {"held_key": lease.session, "held_owner": lease.owner, "held_epoch": lease.epoch}


class Fenced(NamedTuple):
    """The session row as the fence left it."""

    event_seq: int
    """The last event seq reserved (the commit's events end there)."""
    generation: int


@functools.cache
def _fence_statement(
    events: bool, status: bool, pending: bool, generation: bool
) -> DriverStatement:
    values: dict[str, Any] = {
        "lease_expires_at": bindparam("f_expires"),
        "updated_at": bindparam("f_now"),
    }
    if events:
        values["event_seq"] = sessions.c.event_seq + bindparam("f_events")
    if status:
        values["status"] = bindparam("f_status")
    if pending:
        values["pending"] = bindparam("f_pending")
    if generation:
        values["generation"] = sessions.c.generation + 1
    return DriverStatement(
        update(sessions)
        .where(*_HELD)
        .values(values)
        .returning(sessions.c.event_seq, sessions.c.generation)
    )


def fence(
    conn: Connection,
    lease: Lease,
    ttl: float,
    now: float,
    *,
    events: int = 0,
    status: SessionStatus | None = None,
    set_pending: bool = False,
    pending: str | None = None,
    next_generation: bool = False,
) -> Fenced:
    """Check the lease and extend it in one UPDATE of the session row, which also reserves
    `events` seqs, and sets the status, `pending` (with `set_pending`) or the next generation.

    Returns the row's `event_seq` (the last seq reserved) and `generation`, as updated. Raises
    `LeaseLostError` if the lease is gone; nothing else is written then.
    """
    stmt = _fence_statement(events > 0, status is not None, set_pending, next_generation)
    params = {**_held(lease), "f_expires": now + ttl, "f_now": now}
    if events > 0:
        params["f_events"] = events
    if status is not None:
        params["f_status"] = SessionStatus(status).value
    if set_pending:
        params["f_pending"] = pending
    row = stmt.first(conn, params)
    if row is None:
        raise _lease_lost(lease)
    return Fenced(int(row[0]), int(row[1]))


def _lease_lost(lease: Lease) -> LeaseLostError:
    return LeaseLostError(
        f"lease on session {lease.session!r} (owner {lease.owner!r}, epoch {lease.epoch}) "
        "is no longer held"
    )


_ACQUIRE = DriverStatement(
    update(sessions)
    .where(
        sessions.c.key == bindparam("a_key"),
        or_(sessions.c.lease_owner.is_(None), sessions.c.lease_expires_at < bindparam("a_now")),
    )
    .values(
        lease_owner=bindparam("a_owner"),
        lease_epoch=sessions.c.lease_epoch + 1,
        lease_expires_at=bindparam("a_expires"),
        updated_at=bindparam("a_now"),
    )
    .returning(sessions.c.lease_epoch)
)


def acquire_lease(conn: Connection, session: str, owner: str, ttl: float, now: float) -> int | None:
    params = {"a_key": session, "a_now": now, "a_owner": owner, "a_expires": now + ttl}
    row = _ACQUIRE.first(conn, params)
    return None if row is None else int(row[0])


_RENEW = DriverStatement(
    update(sessions).where(*_HELD).values(lease_expires_at=bindparam("f_expires"))
)
_RELEASE = DriverStatement(
    update(sessions)
    .where(*_HELD)
    .values(lease_owner=bindparam("f_owner"), lease_expires_at=bindparam("f_expires"))
)


def renew_lease(conn: Connection, lease: Lease, ttl: float, now: float) -> bool:
    return _RENEW.count(conn, {**_held(lease), "f_expires": now + ttl}) == 1


def release_lease(conn: Connection, lease: Lease) -> None:
    _RELEASE.count(conn, {**_held(lease), "f_owner": None, "f_expires": 0})


# -- step commits -------------------------------------------------------------------------------


def commit_step(
    conn: Connection,
    lease: Lease,
    commit: StepCommit,
    encoded: EncodedCommit,
    ttl: float,
    now: float,
) -> int:
    """The body of `SqlStore.commit`; returns the last event seq reserved."""
    if sql_commit_postgres.fits(conn, encoded):
        try:
            one = sql_commit_postgres.commit_step(conn, lease, commit, encoded, ttl, now)
        except integrity_errors() as err:
            raise _conflict(lease.session, commit, encoded) from err
        if one is None:
            raise _lease_lost(lease)
        return one
    last_seq = _step_fence(conn, lease, commit, encoded, ttl, now).event_seq
    write_rows(conn, lease.session, commit, encoded, last_seq, now)
    return last_seq


def commit_local(
    conn: Connection,
    lease: Lease,
    run: Callable[[StoreHandle], R],
    build: Callable[[R], StepCommit],
    ttl: float,
    now: float,
) -> tuple[R, StepCommit, int]:
    """The body of `SqlStore.commit_local`: fence, the tool, then its step, in one transaction.

    The fence comes first so a zombie worker's tool never writes at all; the session row stays
    locked while the tool runs, which is what makes its writes exactly-once with the step.
    """
    last_seq = fence(conn, lease, ttl, now).event_seq
    result = run_local(conn, run)
    commit = build(result)
    encoded = encode_commit(lease.session, commit)
    if commit.events or commit.session_status is not None or commit.set_pending:
        last_seq = _step_fence(conn, lease, commit, encoded, ttl, now).event_seq
    write_rows(conn, lease.session, commit, encoded, last_seq, now)
    return result, commit, last_seq


def _step_fence(
    conn: Connection,
    lease: Lease,
    commit: StepCommit,
    encoded: EncodedCommit,
    ttl: float,
    now: float,
) -> Fenced:
    return fence(
        conn,
        lease,
        ttl,
        now,
        events=len(commit.events),
        status=commit.session_status,
        set_pending=commit.set_pending,
        pending=encoded.pending,
    )


_INSERT = {
    table: DriverStatement(insert(table))
    for table in (steps, messages, events, confirmations, facts, approval_timers)
}


@functools.cache
def _turn_update(columns: tuple[str, ...]) -> DriverStatement:
    return DriverStatement(
        update(turns)
        .where(
            turns.c.session_key == bindparam("t_session"), turns.c.turn_id == bindparam("t_turn")
        )
        .values({name: bindparam(f"t_{name}") for name in columns})
    )


def write_rows(
    conn: Connection,
    session: str,
    commit: StepCommit,
    encoded: EncodedCommit,
    last_seq: int,
    now: float,
) -> None:
    """Everything a commit writes after the fence; a duplicate key is a `StepConflictError`."""
    try:
        if commit.step_id is not None and encoded.step_value is not None:
            step = step_row(session, commit.turn_id, commit.step_id, encoded.step_value)
            _INSERT[steps].count(conn, {**step, "created_at": now})
        insert_many(conn, messages, message_rows(session, encoded.messages))
        insert_many(conn, events, stamped(event_rows(session, encoded.events, last_seq), now))
        insert_many(conn, confirmations, encoded.confirmations)
        insert_many(conn, facts, encoded.facts)
        insert_many(conn, approval_timers, encoded.timers)
    except integrity_errors() as err:
        raise _conflict(session, commit, encoded) from err
    changes = turn_changes(commit, encoded, now)
    if changes:
        params = {f"t_{name}": value for name, value in changes.items()}
        params.update(t_session=session, t_turn=commit.turn_id)
        _turn_update(tuple(changes)).count(conn, params)


def _conflict(session: str, commit: StepCommit, encoded: EncodedCommit) -> StepConflictError:
    return StepConflictError(
        f"session {session!r} already has step {commit.step_id!r}, one of message indexes "
        f"{[m.idx for m in encoded.messages]}, or one of the commit's confirmations or fact "
        "versions"
    )


def stamped(rows: Sequence[Mapping[str, Any]], now: float | None = None) -> list[dict[str, Any]]:
    """`steps` or `events` rows with the time they are written (`created_at`, revision 0015):
    the operator console's timeline and step durations. The wall clock where no `now` is at
    hand: a time to show a person, which orders nothing."""
    at = time.time() if now is None else now
    return [{**row, "created_at": at} for row in rows]


def insert_many(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """One driver call per table: a single-row INSERT run as an executemany.

    A literal multi-row VALUES would be compiled anew for every row count, which costs more than
    the round trip it saves; the driver's executemany reuses one prepared statement instead
    (psycopg pipelines it).
    """
    _INSERT[table].execute_many(conn, rows)
