"""Rows for what tools leave behind besides the transcript: confirmations a person must answer,
receipts of external writes, versioned facts, and the archive a reset moves a generation into.

Kept apart from `storage.records` (turns, sessions, step commits) only for size; the rules are the
same: rows keyed by the SQL column names, JSON values as text, shared by both stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from agent.seams import (
    ApprovalTimer,
    ArchivedGeneration,
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    JsonValue,
    ReceiptRecord,
    ReceiptStatus,
    TimerAction,
    TimerKind,
    answerers_from_json,
    answerers_to_json,
    event_from_json,
    message_from_json,
)
from storage.json_text import dump_json, dump_or_null, load_json

Row = Mapping[Any, Any]
"""A row as the SQL tables hold it: SQLAlchemy's `Row._mapping`, or a dict in `MemoryStore`."""


# -- confirmations ------------------------------------------------------------------------------


def confirmation_values(record: ConfirmationRecord) -> dict[str, Any]:
    return {
        "session_key": record.session,
        "confirmation_id": record.confirmation_id,
        "turn_id": record.turn_id,
        "call_id": record.call_id,
        "tool": record.tool,
        "arguments": dump_json(record.arguments),
        "prompt": record.prompt,
        "answerers": answerers_to_json(record.answerers),
        "details": dump_or_null(record.details),
        "status": ConfirmationStatus(record.status).value,
        "answered_by": record.by,
        "follow_up_turn": record.follow_up_turn,
        "created_at": record.created_at,
        "resolved_at": record.resolved_at,
        "reason": record.reason,
        "expires_at": record.expires_at,
        "approved_arguments": dump_or_null(record.approved_arguments),
    }


def confirmation_record(row: Row) -> ConfirmationRecord:
    arguments = load_json(row["arguments"])
    details = load_json(row["details"])
    approved = load_json(row["approved_arguments"]) if row.get("approved_arguments") else None
    return ConfirmationRecord(
        session=row["session_key"],
        confirmation_id=row["confirmation_id"],
        turn_id=row["turn_id"],
        call_id=row["call_id"],
        tool=row["tool"],
        arguments=arguments if isinstance(arguments, dict) else {},
        prompt=row["prompt"],
        answerers=answerers_from_json(row["answerers"]),
        details=details if isinstance(details, dict) else None,
        status=ConfirmationStatus(row["status"]),
        by=row["answered_by"],
        follow_up_turn=row["follow_up_turn"],
        created_at=float(row["created_at"]),
        resolved_at=None if row["resolved_at"] is None else float(row["resolved_at"]),
        # Rows from before revision 0005 (an old dump, a test's literal) have neither.
        reason=row.get("reason"),
        expires_at=None if row.get("expires_at") is None else float(row["expires_at"]),
        # Rows from before revision 0014 have no column for it.
        approved_arguments=approved if isinstance(approved, dict) else None,
    )


def confirmation_answer(
    accepted: bool,
    by: str | None,
    follow_up_turn: str,
    now: float,
    *,
    status: ConfirmationStatus | None = None,
    reason: str | None = None,
    approved_arguments: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The columns a resolution sets (on a row that must still be pending); `status` is read
    from `accepted` unless given (`expired`, when nobody answered in time)."""
    if status is None:
        status = ConfirmationStatus.ACCEPTED if accepted else ConfirmationStatus.DENIED
    return {
        "status": ConfirmationStatus(status).value,
        "answered_by": by,
        "follow_up_turn": follow_up_turn,
        "resolved_at": now,
        "reason": reason,
        "approved_arguments": dump_or_null(approved_arguments),
    }


# -- approval timers ----------------------------------------------------------------------------


def timer_values(timer: ApprovalTimer) -> dict[str, Any]:
    return {
        "session_key": timer.session,
        "kind": TimerKind(timer.kind).value,
        "turn_id": timer.turn_id,
        "request_id": timer.request_id,
        "due_at": timer.due_at,
        "expires_after": timer.expires_after,
        "created_at": timer.created_at,
        "action": TimerAction(timer.action).value,
        "answerers": answerers_to_json(timer.answerers),
        "fired_at": timer.fired_at,
    }


def timer_record(row: Row) -> ApprovalTimer:
    return ApprovalTimer(
        session=row["session_key"],
        kind=TimerKind(row["kind"]),
        turn_id=row["turn_id"],
        request_id=row["request_id"],
        due_at=float(row["due_at"]),
        expires_after=float(row["expires_after"]),
        created_at=float(row["created_at"]),
        action=TimerAction(row.get("action") or TimerAction.EXPIRE),
        answerers=answerers_from_json(row.get("answerers")),
        fired_at=None if row.get("fired_at") is None else float(row["fired_at"]),
    )


# -- receipts -----------------------------------------------------------------------------------

SETTLED_RECEIPTS = (ReceiptStatus.COMPLETED.value, ReceiptStatus.FAILED.value)
"""`receipts.status` of a receipt whose outcome is known: what retention may prune."""


def prepared_receipt(record: ReceiptRecord, attempt: int) -> dict[str, Any]:
    """The row of a receipt about to be tried: `prepared`, no outcome yet, whatever the caller's
    record said about status, value and error."""
    return {
        "session_key": record.session,
        "key": record.key,
        "receipt_id": record.receipt_id,
        "fingerprint": record.fingerprint,
        "status": ReceiptStatus.PREPARED.value,
        "turn_id": record.turn_id,
        "step_id": record.step_id,
        "attempt": attempt,
        "value": None,
        "error": None,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
    }


def receipt_outcome(
    status: ReceiptStatus, value: JsonValue, error: str | None, now: float
) -> dict[str, Any]:
    """The columns a settlement sets."""
    return {
        "status": ReceiptStatus(status).value,
        "value": dump_or_null(value),
        "error": error,
        "updated_at": now,
    }


def receipt_record(row: Row) -> ReceiptRecord:
    return ReceiptRecord(
        session=row["session_key"],
        key=row["key"],
        receipt_id=row["receipt_id"],
        fingerprint=row["fingerprint"],
        status=ReceiptStatus(row["status"]),
        turn_id=row["turn_id"],
        step_id=row["step_id"],
        attempt=int(row["attempt"]),
        value=load_json(row["value"]),
        error=row["error"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )


def receipt_conflict(key: str, status: str) -> str:
    return (
        f"effect key {key!r} already has a {status} receipt; only a failed one may be tried again"
    )


# -- facts --------------------------------------------------------------------------------------


def fact_values(record: FactRecord) -> dict[str, Any]:
    return {
        "session_key": record.session,
        "key": record.key,
        "version": record.version,
        "value": dump_json(record.value),
        "turn_id": record.turn_id,
        "step_id": record.step_id,
        "call_id": record.call_id,
        "created_at": record.created_at,
    }


def fact_record(row: Row) -> FactRecord:
    return FactRecord(
        session=row["session_key"],
        key=row["key"],
        version=int(row["version"]),
        value=load_json(row["value"]),
        turn_id=row["turn_id"],
        step_id=row["step_id"],
        call_id=row["call_id"],
        created_at=float(row["created_at"]),
    )


# -- the archive --------------------------------------------------------------------------------


def archived_generation(
    session: str,
    generation: int,
    *,
    messages: Iterable[Row],
    steps: Iterable[Row],
    events: Iterable[Row],
    facts: Iterable[Row],
) -> ArchivedGeneration:
    """A retired generation from its rows, each iterable already in its table's order."""
    return ArchivedGeneration(
        session=session,
        generation=generation,
        messages=[message_from_json(row["body"]) for row in messages],
        steps={row["step_id"]: load_json(row["value"]) for row in steps},
        events=[event_from_json(row["body"], session=session, seq=row["seq"]) for row in events],
        facts=[fact_record(row) for row in facts],
    )
