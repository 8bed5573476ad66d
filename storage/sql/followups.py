"""Transaction bodies for reminders and escalations (`FollowUps`): claim a due one, list a
request's fired escalations.

The claim is one conditional UPDATE (`fired_at` still NULL, the row still there): on PostgreSQL a
concurrent claim or the request's end (which deletes the row) makes it match nothing once the
other commits, on SQLite writers are serial; either way exactly one sweeper logs the event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Connection

from agent.seams import ApprovalTimer, TimerAction, TimerKind, TurnEvent
from storage.ledger_records import timer_record
from storage.sql.parks import log_events
from storage.sql.schema import approval_timers


def fire(
    conn: Connection, timer: ApprovalTimer, now: float, new_events: Sequence[TurnEvent]
) -> int | None:
    """The body of `SqlStore.fire_timer`: the last event seq, or None when the claim failed."""
    claimed = conn.execute(
        update(approval_timers)
        .where(
            *_of_request(timer.session, timer.kind, timer.turn_id, timer.request_id),
            approval_timers.c.action == TimerAction(timer.action).value,
            approval_timers.c.fired_at.is_(None),
        )
        .values(fired_at=now)
    ).rowcount
    if claimed != 1:
        return None
    return log_events(conn, timer.session, new_events, updated_at=now)


def fired_escalations(
    conn: Connection, session: str, kind: TimerKind, turn_id: str, request_id: str
) -> list[ApprovalTimer]:
    query = (
        select(approval_timers)
        .where(
            *_of_request(session, kind, turn_id, request_id),
            approval_timers.c.action == TimerAction.ESCALATE.value,
            approval_timers.c.fired_at.is_not(None),
        )
        .order_by(approval_timers.c.id)
    )
    return [timer_record(row) for row in conn.execute(query).mappings()]


def _of_request(session: str, kind: TimerKind, turn_id: str, request_id: str) -> list[Any]:
    return [
        approval_timers.c.session_key == session,
        approval_timers.c.kind == TimerKind(kind).value,
        approval_timers.c.turn_id == turn_id,
        approval_timers.c.request_id == request_id,
    ]
