"""The storage boundary: engine records in, rows of JSON text out, and back.

Both stores encode through here and keep the same rows (mappings keyed by the SQL column names),
so `MemoryStore` keeps exactly what `SqlStore` would: a value that does not survive JSON fails on
both, `TurnInput.inbound.raw` is dropped by both, and a value read back is never the caller's
object. Confirmations, receipts and facts are in `storage.ledger_records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.seams import (
    UNFINISHED,
    SessionRecord,
    SessionStatus,
    StepCommit,
    TurnCancelled,
    TurnEvent,
    TurnInput,
    TurnKind,
    TurnRecord,
    TurnStatus,
    event_to_json,
    holds_compaction,
    message_to_json,
)
from storage.json_text import canonical_json, dump_json, load_json
from storage.ledger_records import Row, confirmation_values, fact_values, timer_values

OPENING_ROLES = ("user", "trigger")
"""Roles of the message that opens a turn (every turn's first message; no other has them)."""

UNFINISHED_VALUES = tuple(status.value for status in UNFINISHED)
"""`turns.status` of a turn on the queue: queued or running."""
OPEN_VALUES = (*UNFINISHED_VALUES, TurnStatus.SUSPENDED.value)
"""`turns.status` of a turn its session is not done with: on the queue, or parked."""
FINISHED_VALUES = tuple(status.value for status in TurnStatus if status.finished)
"""`turns.status` of a turn that ended: what retention may prune."""


@dataclass(frozen=True, kw_only=True)
class MessageRow:
    idx: int
    turn_id: str
    role: str
    body: str
    compaction: bool = False
    """It `holds_compaction`: the stores mark it so a compacting session's tail is found
    without reading the transcript."""


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
    confirmations: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    timers: list[dict[str, Any]] = field(default_factory=list)


LIVE_ONLY = frozenset({"message.delta", "progress.updated"})
"""Event types shown live and never logged: text typed so far and the model's progress."""


def encode_events(session: str, events: Sequence[TurnEvent]) -> list[EventRow]:
    """Serialise events for the durable log, refusing what would corrupt it.

    A live-only delta in the log would be replayed to late subscribers, and an event of another
    session would be read back as this session's (its session comes from the row key).
    """
    for ev in events:
        if ev.type in LIVE_ONLY:
            raise ValueError(f"{ev.type} events are live only and are never committed")
        if ev.session != session:
            raise ValueError(f"event for session {ev.session!r} committed under {session!r}")
    return [EventRow(turn_id=ev.turn_id, type=ev.type, body=event_to_json(ev)) for ev in events]


def encode_commit(session: str, commit: StepCommit) -> EncodedCommit:
    """Serialise a whole commit before its transaction starts, so a value that cannot be stored
    fails without having taken a lock."""
    stray = (
        {c.session for c in commit.confirmations}
        | {f.session for f in commit.facts}
        | {t.session for t in commit.timers}
    )
    if stray - {session}:
        raise ValueError(f"records for sessions {sorted(stray)} committed under {session!r}")
    return EncodedCommit(
        step_value=dump_json(commit.step_value) if commit.step_id is not None else None,
        messages=[
            MessageRow(
                idx=idx,
                turn_id=msg.turn_id,
                role=msg.role,
                body=message_to_json(msg),
                compaction=holds_compaction(msg),
            )
            for idx, msg in commit.messages
        ],
        events=encode_events(session, commit.events),
        turn_result=dump_json(commit.turn_result) if commit.turn_result is not None else None,
        cancel_reason=cancel_reason(commit),
        pending=canonical_json(commit.pending) if commit.pending is not None else None,
        confirmations=[confirmation_values(c) for c in commit.confirmations],
        facts=[fact_values(f) for f in commit.facts],
        timers=[timer_values(t) for t in commit.timers],
    )


def turn_changes(commit: StepCommit, encoded: EncodedCommit, now: float) -> dict[str, Any]:
    """The `turns` columns a commit sets on its turn, by column name (none: leave the row).

    A commit that ends the turn stamps `finished_at`: retention measures a turn's age from its
    end, not its start (a turn parked for a week is not a week old when it ends)."""
    changes: dict[str, Any] = {}
    if commit.turn_status is not None:
        changes["status"] = TurnStatus(commit.turn_status).value
        if TurnStatus(commit.turn_status).finished:
            changes["finished_at"] = now
    if encoded.turn_result is not None:
        changes["result"] = encoded.turn_result
    if encoded.cancel_reason is not None:
        changes["cancel_reason"] = encoded.cancel_reason
    if commit.turn_fingerprint is not None:
        changes["fingerprint"] = commit.turn_fingerprint
    return changes


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
    """The events with the seqs their transaction reserved: `last_seq-n+1 .. last_seq`."""
    first = last_seq - len(events) + 1
    return [ev.model_copy(update={"seq": first + i}) for i, ev in enumerate(events)]


def step_row(session: str, turn_id: str, step_id: str, value: str) -> dict[str, Any]:
    """A `steps` row: a step's memo (`value`, JSON text), which a replayed turn reads back
    instead of running the step again. Written by a commit, and by an answer to a park (the
    answer is the parked step's memo)."""
    return {"session_key": session, "turn_id": turn_id, "step_id": step_id, "value": value}


def message_rows(session: str, rows: Sequence[MessageRow]) -> list[dict[str, Any]]:
    """The `messages` rows for encoded messages. `compaction` is true or NULL, never false: the
    index that finds a compacting session's tail holds only the non-NULL rows."""
    return [
        {
            "session_key": session,
            "idx": m.idx,
            "turn_id": m.turn_id,
            "role": m.role,
            "body": m.body,
            "compaction": True if m.compaction else None,
        }
        for m in rows
    ]


def event_rows(session: str, rows: Sequence[EventRow], last_seq: int) -> list[dict[str, Any]]:
    """The `events` rows for encoded events whose seqs end at `last_seq`."""
    first = last_seq - len(rows) + 1
    return [
        {
            "session_key": session,
            "seq": first + i,
            "turn_id": e.turn_id,
            "type": e.type,
            "body": e.body,
        }
        for i, e in enumerate(rows)
    ]


RESET_INPUT = TurnInput(text="").model_dump_json()
"""A reset turn's input: it has nothing to say, but `TurnRecord.input` is not optional."""


def new_turn(
    session: str,
    turn_id: str,
    input: str,
    *,
    kind: TurnKind,
    now: float,
    speaker: str | None = None,
) -> dict[str, Any]:
    """A queued turn's row, but for what the store decides in the enqueueing transaction: its
    `id` (its queue position) and `generation` (the session's, read under the session's lock).
    `speaker`: `TurnInput.speaker_key`, indexed for `recent_turns`."""
    return {
        "session_key": session,
        "turn_id": turn_id,
        "kind": kind.value,
        "status": TurnStatus.QUEUED.value,
        "input": input,
        "result": None,
        "cancel_reason": None,
        "fingerprint": None,
        "created_at": now,
        "cancelled_by": None,
        "speaker": speaker,
    }


def turn_record(row: Row) -> TurnRecord:
    return TurnRecord(
        session=row["session_key"],
        turn_id=row["turn_id"],
        seq=int(row["id"]),
        status=TurnStatus(row["status"]),
        input=TurnInput.model_validate_json(row["input"]),
        result=load_json(row["result"]),
        cancel_reason=row["cancel_reason"],
        kind=TurnKind(row["kind"]),
        fingerprint=row["fingerprint"],
        cancelled_by=row.get("cancelled_by"),
        created_at=float(row["created_at"]),
    )


def session_record(row: Row) -> SessionRecord:
    return SessionRecord(
        key=row["key"],
        status=SessionStatus(row["status"]),
        generation=int(row["generation"]),
        lease_owner=row["lease_owner"],
        lease_epoch=int(row["lease_epoch"]),
        lease_expires_at=float(row["lease_expires_at"]),
        pending=load_json(row["pending"]),
        updated_at=float(row.get("updated_at") or 0.0),
    )


def applied_reset(archived: int, now: float) -> dict[str, Any]:
    """The `turns` columns a reset sets on its own turn once applied: completed, its result
    naming the generation it archived (`reset_archived` reads it back) and the one it started."""
    result = {"status": "completed", "archived_generation": archived, "generation": archived + 1}
    return {"status": TurnStatus.COMPLETED.value, "result": dump_json(result), "finished_at": now}


def reset_archived(result: str | None) -> int | None:
    """The generation a reset turn's `result` says it archived (None if it names none): what
    pruning the reset's turn removes from the archive."""
    value = load_json(result)
    generation = value.get("archived_generation") if isinstance(value, dict) else None
    return generation if isinstance(generation, int) else None


def parked_on_other_turn(status: str, pending: str | None, turn_id: str) -> bool:
    """Whether a new turn must be refused: the session is parked on a different turn.

    A suspended session whose pending record names no turn counts as parked on another one: the
    safe reading when the record is not what this code expects.
    """
    if status != SessionStatus.SUSPENDED:
        return False
    return bool(_parked_turn(pending) != turn_id)


def suspended_message(session: str, pending: str | None) -> str:
    return (
        f"session {session!r} is suspended waiting for input on turn {_parked_turn(pending)!r}; "
        "answer or cancel it before starting another turn"
    )


def _parked_turn(pending: str | None) -> Any:
    parked = load_json(pending)
    return parked.get("turn_id") if isinstance(parked, dict) else None
