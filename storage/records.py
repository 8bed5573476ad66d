"""The storage boundary: engine records in, JSON text out, and back.

Both stores encode through here, so `MemoryStore` keeps exactly what `SqlStore` would (a value
that does not survive JSON fails on both; `TurnInput.inbound.raw` is dropped by both) and a
value read back is never the caller's object.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from agent.events import TurnCancelled, TurnEvent, event_to_json
from agent.messages import JsonValue, message_to_json
from agent.seams import SessionRecord, SessionStatus, StepCommit, TurnRecord, TurnStatus
from agent.turn_input import TurnInput


def dump_json(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def load_json(text: str | None) -> JsonValue:
    return None if text is None else json.loads(text)


@dataclass(frozen=True, kw_only=True)
class MessageRow:
    idx: int
    turn_id: str
    role: str
    body: str


@dataclass(frozen=True, kw_only=True)
class EventRow:
    turn_id: str
    type: str
    body: str


@dataclass(frozen=True, kw_only=True)
class EncodedCommit:
    """A `StepCommit` serialised, before seqs are known (they come from the fence)."""

    step_value: str | None
    messages: list[MessageRow]
    events: list[EventRow]
    turn_result: str | None
    cancel_reason: str | None
    pending: str | None


def encode_commit(session: str, commit: StepCommit) -> EncodedCommit:
    """Serialise a commit, refusing what would corrupt the log rather than storing it.

    A live-only delta in the durable log would be replayed to late subscribers, and an event of
    another session would be read back as this session's (its session comes from the row key).
    """
    for ev in commit.events:
        if ev.type == "message.delta":
            raise ValueError("message.delta events are live only and are never committed")
        if ev.session != session:
            raise ValueError(f"event for session {ev.session!r} committed under {session!r}")
    return EncodedCommit(
        step_value=dump_json(commit.step_value) if commit.step_id is not None else None,
        messages=[
            MessageRow(idx=idx, turn_id=msg.turn_id, role=msg.role, body=message_to_json(msg))
            for idx, msg in commit.messages
        ],
        events=[
            EventRow(turn_id=ev.turn_id, type=ev.type, body=event_to_json(ev))
            for ev in commit.events
        ],
        turn_result=dump_json(commit.turn_result) if commit.turn_result is not None else None,
        cancel_reason=cancel_reason(commit),
        pending=dump_json(commit.pending) if commit.pending is not None else None,
    )


def cancel_reason(commit: StepCommit) -> str | None:
    """The reason to record on a cancelled turn, taken from the commit's `turn.cancelled` event.

    `StepCommit` has no field of its own for it; the event the engine must emit anyway says it.
    """
    if commit.turn_status is not TurnStatus.CANCELLED:
        return None
    for ev in commit.events:
        if isinstance(ev, TurnCancelled) and ev.turn_id == commit.turn_id:
            return ev.reason
    return None


def numbered(events: Sequence[TurnEvent], last_seq: int) -> list[TurnEvent]:
    """The commit's events with the seqs the fence reserved: `last_seq-n+1 .. last_seq`."""
    first = last_seq - len(events) + 1
    return [ev.model_copy(update={"seq": first + i}) for i, ev in enumerate(events)]


def turn_record(
    *,
    session: str,
    turn_id: str,
    seq: int,
    status: str,
    input: str,
    result: str | None,
    cancel_reason: str | None,
) -> TurnRecord:
    return TurnRecord(
        session=session,
        turn_id=turn_id,
        seq=seq,
        status=TurnStatus(status),
        input=TurnInput.model_validate_json(input),
        result=load_json(result),
        cancel_reason=cancel_reason,
    )


def session_record(
    *,
    key: str,
    status: str,
    generation: int,
    lease_owner: str | None,
    lease_epoch: int,
    lease_expires_at: float,
    pending: str | None,
) -> SessionRecord:
    return SessionRecord(
        key=key,
        status=SessionStatus(status),
        generation=generation,
        lease_owner=lease_owner,
        lease_epoch=lease_epoch,
        lease_expires_at=lease_expires_at,
        pending=load_json(pending),
    )


def parked_on_other_turn(status: str, pending: str | None, turn_id: str) -> bool:
    """Whether a new turn must be refused: the session is parked on a different turn.

    A suspended session whose pending record names no turn counts as parked on another one: the
    safe reading when the record is not what this code expects.
    """
    if status != SessionStatus.SUSPENDED:
        return False
    parked = load_json(pending)
    parked_turn = parked.get("turn_id") if isinstance(parked, dict) else None
    return parked_turn != turn_id


def suspended_message(session: str, pending: str | None) -> str:
    parked = load_json(pending)
    parked_turn = parked.get("turn_id") if isinstance(parked, dict) else None
    return (
        f"session {session!r} is suspended waiting for input on turn {parked_turn!r}; "
        "answer or cancel it before starting another turn"
    )
