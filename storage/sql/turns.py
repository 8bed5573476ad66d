"""Transaction bodies for the turn queue: enqueue (turns and resets), cancel requests, and
the reads the runtime and operators make of turns, sessions and the logs.

Every write here starts by locking the session row (PostgreSQL: FOR UPDATE or an UPDATE of it;
SQLite: the database write lock BEGIN IMMEDIATE took), so it serialises with the fenced commits
of the worker holding the session: a turn cannot be queued between a park's check and its commit.
Answering and stopping a park: `storage.sql.parks`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Row, bindparam, delete, exists, func, or_, select, update
from sqlalchemy.engine import Connection

from agent.seams import (
    ApprovalTimer,
    JsonValue,
    SessionRecord,
    SessionStatus,
    SessionSuspendedError,
    StepConflictError,
    TimerKind,
    TurnEvent,
    TurnKind,
    TurnRecord,
    TurnStatus,
    event_from_json,
)
from storage.json_text import load_json
from storage.ledger_records import timer_record
from storage.records import (
    OPEN_VALUES,
    UNFINISHED_VALUES,
    parked_on_other_turn,
    session_record,
    suspended_message,
    turn_record,
)
from storage.sql.dialects import SqlDialect
from storage.sql.schema import approval_timers, events, sessions, steps, turns


class _QueueStatements:
    """Built once per dialect: executing a prepared construct skips building it and deriving its
    cache key, which was most of what queueing a turn cost the web process (each Slack event's
    ack waits on it)."""

    def __init__(self, dialect: SqlDialect) -> None:
        s, t = sessions.c, turns.c
        # Creates the session row or, when it exists, locks it (an ON CONFLICT DO UPDATE locks
        # the row on PostgreSQL like FOR UPDATE; SQLite's BEGIN IMMEDIATE holds the database),
        # so a concurrent park (whose fence updates this row) cannot slip between the suspended
        # check and the insert. One statement instead of an insert and a SELECT ... FOR UPDATE.
        upsert = dialect.insert(sessions)
        self.lock_session = upsert.on_conflict_do_update(
            index_elements=[s.key], set_={"status": s.status}
        ).returning(s.status, s.pending, s.generation)
        self.insert_turn = (
            dialect.insert(turns)
            .on_conflict_do_nothing(index_elements=[t.session_key, t.turn_id])
            .returning(t.id)
        )
        self.supersede = (
            update(turns)
            .where(
                t.session_key == bindparam("b_session"),
                t.status.in_(UNFINISHED_VALUES),
                t.kind == TurnKind.TURN.value,
                t.cancel_reason.is_(None),
                t.id != bindparam("b_created"),
            )
            .values(cancel_reason=bindparam("b_reason"))
        )


_GET_TURN = select(turns).where(
    turns.c.session_key == bindparam("b_session"), turns.c.turn_id == bindparam("b_turn")
)


# The reads a worker makes on every turn, built once (see `_QueueStatements` for why).
_NEXT_TURN = (
    select(turns)
    .where(turns.c.session_key == bindparam("b_session"), turns.c.status.in_(UNFINISHED_VALUES))
    .order_by(turns.c.id)
    .limit(1)
)
_STEPS = (
    select(steps.c.step_id, steps.c.value)
    .where(steps.c.session_key == bindparam("b_session"), steps.c.turn_id == bindparam("b_turn"))
    .order_by(steps.c.id)
)


_BUILT: dict[str, _QueueStatements] = {}


def _queue_statements(dialect: SqlDialect) -> _QueueStatements:
    """The dialect's statements, built by whichever store asks first (two threads racing both
    build a set, and one is kept: they are the same statements)."""
    built = _BUILT.get(dialect.name)
    if built is None:
        built = _BUILT.setdefault(dialect.name, _QueueStatements(dialect))
    return built


def enqueue(
    conn: Connection,
    dialect: SqlDialect,
    row: dict[str, Any],
    *,
    refuse_if_parked: bool,
    cancel_unfinished: str | None,
) -> tuple[TurnRecord, bool]:
    """Queue the turn `row` (see `records.new_turn`), or return the one with its id.

    Three statements for a new turn (lock the session, insert the turn, mark what it
    supersedes); a known turn id reads it back instead and changes nothing.
    """
    q = _queue_statements(dialect)
    session, turn_id = row["session_key"], row["turn_id"]
    state = conn.execute(
        q.lock_session,
        {"key": session, "status": SessionStatus.NEW.value, "updated_at": row["created_at"]},
    ).one()
    if refuse_if_parked and parked_on_other_turn(state.status, state.pending, turn_id):
        existing = get_turn(conn, session, turn_id)
        if existing is not None:
            return existing, False
        if not reset_pending(conn, session):
            raise SessionSuspendedError(suspended_message(session, state.pending))
    values = {**row, "generation": state.generation}
    created = conn.execute(q.insert_turn, values).scalar_one_or_none()
    if created is None:
        existing = get_turn(conn, session, turn_id)
        if existing is None:
            raise StepConflictError(f"turn {turn_id!r} conflicted but cannot be read")
        return existing, False
    if cancel_unfinished is not None:
        conn.execute(
            q.supersede, {"b_session": session, "b_created": created, "b_reason": cancel_unfinished}
        )
    return turn_record({**values, "id": created}), True


def reset_pending(conn: Connection, session: str) -> bool:
    """Whether a reset is queued and not yet applied: it will cancel any park, so a new turn may
    queue behind it, and an answer to the park is refused. Read under the session row's lock."""
    queued = select(turns.c.id).where(
        turns.c.session_key == session,
        turns.c.kind == TurnKind.RESET.value,
        turns.c.status.in_(UNFINISHED_VALUES),
    )
    return conn.execute(queued.limit(1)).first() is not None


def request_cancel(conn: Connection, session: str, turn_id: str, reason: str) -> TurnRecord | None:
    """A reset turn is not cancellable (the runtime applies it regardless), so it reads as None."""
    stmt = (
        update(turns)
        .where(
            turns.c.session_key == session,
            turns.c.turn_id == turn_id,
            turns.c.status.in_(UNFINISHED_VALUES),
            turns.c.kind == TurnKind.TURN.value,
        )
        .values(cancel_reason=func.coalesce(turns.c.cancel_reason, reason))
        .returning(*turns.c)
    )
    row = conn.execute(stmt).first()
    return None if row is None else turn_record(row._mapping)


# -- reads --------------------------------------------------------------------------------------


def get_turn(conn: Connection, session: str, turn_id: str) -> TurnRecord | None:
    row = conn.execute(_GET_TURN, {"b_session": session, "b_turn": turn_id}).first()
    return None if row is None else turn_record(row._mapping)


def next_turn(conn: Connection, session: str) -> TurnRecord | None:
    row = conn.execute(_NEXT_TURN, {"b_session": session}).first()
    return None if row is None else turn_record(row._mapping)


def list_turns(conn: Connection, session: str) -> list[TurnRecord]:
    live = select(sessions.c.generation).where(sessions.c.key == session).scalar_subquery()
    query = (
        select(turns)
        .where(turns.c.session_key == session, turns.c.generation == live)
        .order_by(turns.c.id)
    )
    return _turns(conn.execute(query).all())


def list_parked(conn: Connection) -> list[SessionRecord]:
    query = (
        select(sessions)
        .where(sessions.c.status == SessionStatus.SUSPENDED.value, sessions.c.pending.is_not(None))
        .order_by(sessions.c.key)
    )
    return [session_record(row._mapping) for row in conn.execute(query)]


def recent_turns(conn: Connection, speaker: str, limit: int) -> list[TurnRecord]:
    query = select(turns).where(turns.c.speaker == speaker).order_by(turns.c.id.desc())
    return _turns(conn.execute(query.limit(limit)).all())


def due_timers(conn: Connection, now: float, limit: int) -> list[ApprovalTimer]:
    query = (
        select(approval_timers)
        .where(approval_timers.c.due_at <= now, approval_timers.c.fired_at.is_(None))
        .order_by(approval_timers.c.due_at, approval_timers.c.id)
        .limit(limit)
    )
    return [timer_record(row) for row in conn.execute(query).mappings()]


def drop_timer(conn: Connection, timer: ApprovalTimer) -> None:
    conn.execute(
        delete(approval_timers).where(
            approval_timers.c.session_key == timer.session,
            approval_timers.c.kind == TimerKind(timer.kind).value,
            approval_timers.c.turn_id == timer.turn_id,
            approval_timers.c.request_id == timer.request_id,
        )
    )


def open_turns(conn: Connection) -> list[TurnRecord]:
    query = select(turns).where(turns.c.status.in_(OPEN_VALUES)).order_by(turns.c.id)
    return _turns(conn.execute(query).all())


_SESSION_COLUMNS = [column.label(f"s_{column.name}") for column in sessions.c]


def open_work(conn: Connection) -> list[tuple[SessionRecord, list[TurnRecord]]]:
    """One statement (a join), so each turn and its session's lease come from one snapshot even
    under PostgreSQL's READ COMMITTED, where two statements of a transaction may not."""
    query = (
        select(turns, *_SESSION_COLUMNS)
        .join(sessions, sessions.c.key == turns.c.session_key)
        .where(turns.c.status.in_(OPEN_VALUES))
        .order_by(turns.c.session_key, turns.c.id)
    )
    found: dict[str, tuple[SessionRecord, list[TurnRecord]]] = {}
    for row in conn.execute(query).mappings():
        key = row["session_key"]
        if key not in found:
            state = {column.name: row[f"s_{column.name}"] for column in sessions.c}
            found[key] = (session_record(state), [])
        found[key][1].append(turn_record(row))
    return list(found.values())


_GOT_SOMEWHERE = [
    TurnStatus.COMPLETED.value,
    TurnStatus.CANCELLED.value,
    TurnStatus.SUSPENDED.value,
]


def failure_streaks(conn: Connection, at_least: int) -> list[list[TurnRecord]]:
    live = sessions.c.generation
    other = turns.alias("later")
    ended_well = (
        select(func.max(other.c.id))
        .where(
            other.c.session_key == turns.c.session_key,
            other.c.generation == live,
            other.c.kind == TurnKind.TURN.value,
            other.c.status.in_(_GOT_SOMEWHERE),
        )
        .scalar_subquery()
    )
    query = (
        select(turns)
        .join(sessions, sessions.c.key == turns.c.session_key)
        .where(
            turns.c.generation == live,
            turns.c.kind == TurnKind.TURN.value,
            turns.c.status == TurnStatus.FAILED.value,
            turns.c.id > func.coalesce(ended_well, 0),
        )
        .order_by(turns.c.session_key, turns.c.id)
    )
    streaks: dict[str, list[TurnRecord]] = {}
    for row in conn.execute(query).mappings():
        streaks.setdefault(row["session_key"], []).append(turn_record(row))
    return [streak for streak in streaks.values() if len(streak) >= max(at_least, 1)]


def _turns(rows: Any) -> list[TurnRecord]:
    return [turn_record(row._mapping) for row in rows]


def get_session(conn: Connection, session: str) -> SessionRecord | None:
    row: Row[Any] | None = conn.execute(select(sessions).where(sessions.c.key == session)).first()
    return None if row is None else session_record(row._mapping)


def load_steps(conn: Connection, session: str, turn_id: str) -> dict[str, JsonValue]:
    rows = conn.execute(_STEPS, {"b_session": session, "b_turn": turn_id})
    return {row.step_id: load_json(row.value) for row in rows}


def read_events(
    conn: Connection, session: str, after_seq: int, limit: int | None
) -> list[TurnEvent]:
    query = (
        select(events.c.seq, events.c.body)
        .where(events.c.session_key == session, events.c.seq > after_seq)
        .order_by(events.c.seq)
        .limit(limit)
    )
    return [event_from_json(row.body, session=session, seq=row.seq) for row in conn.execute(query)]


def recoverable_sessions(conn: Connection, now: float) -> list[str]:
    has_work = exists().where(
        turns.c.session_key == sessions.c.key, turns.c.status.in_(UNFINISHED_VALUES)
    )
    query = (
        select(sessions.c.key)
        .where(or_(sessions.c.lease_owner.is_(None), sessions.c.lease_expires_at < now), has_work)
        .order_by(sessions.c.key)
    )
    return list(conn.execute(query).scalars())
