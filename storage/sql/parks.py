"""Transaction bodies that end or shorten a park: an answer (`resume`), a Stop (`stop_session`).

Each starts by locking the session row, as every write of the turn queue does
(`storage.sql.turns`), so an answer, a Stop, a racing answer and a reset's enqueue serialise. A
park may wait on several requests (the calls of one batch that each asked): an answer to one
of them while others wait keeps the park (`still_pending`); the last one ends it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import case, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agent.seams import (
    JsonValue,
    ResumeConflictError,
    SessionStatus,
    TimerKind,
    TurnEvent,
    TurnKind,
    TurnRecord,
    TurnStatus,
)
from storage.json_text import canonical_json, dump_json, load_json
from storage.records import UNFINISHED_VALUES, encode_events, event_rows, step_row, turn_record
from storage.sql.commit import stamped
from storage.sql.schema import approval_timers, events, sessions, steps, turns
from storage.sql.turns import reset_pending


def resume(
    conn: Connection,
    session: str,
    turn_id: str,
    expected_pending: JsonValue,
    answer_steps: Mapping[str, JsonValue],
    new_events: Sequence[TurnEvent],
    now: float,
    *,
    still_pending: JsonValue = None,
    request_id: str | None = None,
) -> int:
    """Checks under the session row's lock, then writes; any failed check raises before a write
    would be kept. The lock comes first so that every later statement (a fresh snapshot each, on
    PostgreSQL) sees whatever a racing resume or a reset's enqueue committed while we waited.
    `answer_steps`: the answer's step first, then its notes. `still_pending`: the checkpoint
    when other requests of the turn still wait (the park goes on; only `request_id`'s timer
    goes). Returns the last event seq."""
    state = conn.execute(
        select(sessions.c.status, sessions.c.pending)
        .where(sessions.c.key == session)
        .with_for_update()
    ).first()
    if (
        state is None
        or state.status != SessionStatus.SUSPENDED
        or state.pending != canonical_json(expected_pending)
    ):
        raise ResumeConflictError(
            "the session is not parked on that request (answered already, changed, or reset)"
        )
    if reset_pending(conn, session):
        raise ResumeConflictError("a reset of the session is queued; the park will be cancelled")
    parked = update(turns).where(
        turns.c.session_key == session,
        turns.c.turn_id == turn_id,
        turns.c.status == TurnStatus.SUSPENDED.value,
    )
    # The last answer queues the turn again; an earlier one leaves it parked (a no-op update,
    # which still says whether the turn is the parked one).
    status = TurnStatus.QUEUED if still_pending is None else TurnStatus.SUSPENDED
    requeued = conn.execute(parked.values(status=status.value)).rowcount
    if requeued != 1:
        raise ResumeConflictError(f"turn {turn_id!r} is not the parked turn")
    for step_id, value in answer_steps.items():
        try:
            row = step_row(session, turn_id, step_id, dump_json(value))
            conn.execute(insert(steps).values({**row, "created_at": now}))
        except IntegrityError as err:
            raise ResumeConflictError(f"step {step_id!r} was answered already") from err
    if still_pending is not None:
        drop_input_timers(conn, session, turn_id, request_id)
        return _keep_park(conn, session, still_pending, new_events, now)
    drop_input_timers(conn, session, turn_id)
    return _end_park(conn, session, new_events, now)


def _keep_park(
    conn: Connection,
    session: str,
    still_pending: JsonValue,
    new_events: Sequence[TurnEvent],
    now: float,
) -> int:
    """The session row after an answer while other requests still wait: still `suspended`,
    `pending` without the one answered, `new_events` logged; the last seq."""
    return log_events(
        conn, session, new_events, pending=canonical_json(still_pending), updated_at=now
    )


def _end_park(conn: Connection, session: str, new_events: Sequence[TurnEvent], now: float) -> int:
    """The session row as a park's end leaves it (`running`, no `pending`), with the seqs of
    `new_events` reserved in the same statement and the events logged; the last seq."""
    running = SessionStatus.RUNNING.value
    return log_events(conn, session, new_events, status=running, pending=None, updated_at=now)


def log_events(
    conn: Connection, session: str, new_events: Sequence[TurnEvent], **values: Any
) -> int:
    """Update the session row with `values`, reserving the seqs of `new_events` in the same
    statement, and log the events; the last seq."""
    rows = encode_events(session, new_events)
    last_seq = conn.execute(
        update(sessions)
        .where(sessions.c.key == session)
        .values(**values, event_seq=sessions.c.event_seq + len(rows))
        .returning(sessions.c.event_seq)
    ).scalar_one()
    if rows:
        conn.execute(insert(events), stamped(event_rows(session, rows, int(last_seq))))
    return int(last_seq)


def drop_input_timers(
    conn: Connection, session: str, turn_id: str, request_id: str | None = None
) -> None:
    """A park ended (answered, stopped, expired): its expiry timers have nothing left to do.
    With `request_id`, only that request's (it was answered; its siblings still wait)."""
    stmt = delete(approval_timers).where(
        approval_timers.c.session_key == session,
        approval_timers.c.kind == TimerKind.INPUT.value,
        approval_timers.c.turn_id == turn_id,
    )
    if request_id is not None:
        stmt = stmt.where(approval_timers.c.request_id == request_id)
    conn.execute(stmt)


def stop_session(
    conn: Connection,
    session: str,
    reason: str,
    by: str | None,
    now: float,
    ended_park: Callable[[JsonValue], Sequence[TurnEvent]] | None,
) -> tuple[list[TurnRecord], list[TurnEvent], int]:
    """The body of `SqlStore.stop_session`: the stopped turns, the events logged, and the last
    event seq. Under the session row's lock, so no park or answer commits in between."""
    state = conn.execute(
        select(sessions.c.status, sessions.c.pending)
        .where(sessions.c.key == session)
        .with_for_update()
    ).first()
    if state is None:
        return [], [], 0
    asked = {
        "cancel_reason": func.coalesce(turns.c.cancel_reason, reason),
        "cancelled_by": case((turns.c.cancel_reason.is_(None), by), else_=turns.c.cancelled_by),
    }
    stopped = conn.execute(
        update(turns)
        .where(
            turns.c.session_key == session,
            turns.c.status.in_(UNFINISHED_VALUES),
            turns.c.kind == TurnKind.TURN.value,
            turns.c.cancel_reason.is_(None),
        )
        .values(asked)
        .returning(*turns.c)
    ).all()
    # UPDATE ... RETURNING gives no order on PostgreSQL: queue order, as everywhere else.
    records = sorted((turn_record(row._mapping) for row in stopped), key=lambda t: t.seq)
    logged: list[TurnEvent] = []
    last_seq = 0
    if state.status == SessionStatus.SUSPENDED and state.pending is not None:
        pending = load_json(state.pending)
        parked_turn = pending.get("turn_id") if isinstance(pending, dict) else None
        parked = conn.execute(
            update(turns)
            .where(
                turns.c.session_key == session,
                turns.c.turn_id == str(parked_turn),
                turns.c.status == TurnStatus.SUSPENDED.value,
            )
            .values(status=TurnStatus.QUEUED.value, **asked)
            .returning(*turns.c)
        ).first()
        logged = list(ended_park(pending)) if ended_park is not None else []
        last_seq = _end_park(conn, session, logged, now)
        if parked is not None:
            drop_input_timers(conn, session, str(parked_turn))
            records.append(turn_record(parked._mapping))
    return records, logged, last_seq
