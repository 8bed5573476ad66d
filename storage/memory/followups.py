"""`MemoryStore`'s reminders and escalations: the same claim as `storage.sql.followups`, on the
in-memory state (the store's lock serialises claims, as the row update does in SQL)."""

from __future__ import annotations

from collections.abc import Sequence

from agent.seams import ApprovalTimer, TimerAction, TimerKind
from storage.ledger_records import timer_record
from storage.memory.state import SessionState
from storage.records import EventRow


def fire(
    state: SessionState | None, timer: ApprovalTimer, now: float, rows: Sequence[EventRow]
) -> int | None:
    """As `storage.sql.followups.fire`: the last event seq, or None when the claim failed."""
    key = (TimerKind(timer.kind).value, timer.turn_id, timer.request_id, timer.action.value)
    row = state.timers.get(key) if state is not None else None
    if state is None or row is None or row.get("fired_at") is not None:
        return None
    row["fired_at"] = now
    state.updated_at = now
    return state.append_events(rows)


def fired(
    state: SessionState | None, kind: TimerKind, turn_id: str, request_id: str
) -> list[ApprovalTimer]:
    if state is None:
        return []
    rows = [
        row
        for key, row in state.timers.items()
        if key == (kind.value, turn_id, request_id, TimerAction.ESCALATE.value)
        and row.get("fired_at") is not None
    ]
    return [timer_record(row) for row in sorted(rows, key=lambda row: int(row["id"]))]
