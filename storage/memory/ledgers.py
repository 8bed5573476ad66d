"""`MemoryStore`'s confirmations, effect receipts and facts: the same rows and the same refusals as
`storage.sql.ledgers`, checked before anything is written since nothing here can roll back."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agent.seams import (
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    JsonValue,
    ReceiptRecord,
    ReceiptStatus,
    ResumeConflictError,
    SessionStatus,
    SessionSuspendedError,
    StepConflictError,
    TimerKind,
    TurnRecord,
)
from storage.ledger_records import (
    confirmation_record,
    fact_record,
    prepared_receipt,
    receipt_conflict,
    receipt_outcome,
    receipt_record,
)
from storage.memory.state import RowIds, Rows, SessionState
from storage.records import EventRow, suspended_message, turn_record

# -- confirmations ------------------------------------------------------------------------------


def list_confirmations(
    state: SessionState | None, status: ConfirmationStatus | None
) -> list[ConfirmationRecord]:
    rows = sorted(state.confirmations.values(), key=_id) if state is not None else []
    wanted = None if status is None else ConfirmationStatus(status).value
    return [confirmation_record(row) for row in rows if wanted in (None, row["status"])]


def pending_confirmations(states: Iterable[SessionState]) -> list[ConfirmationRecord]:
    rows = [
        row
        for state in states
        for row in state.confirmations.values()
        if row["status"] == ConfirmationStatus.PENDING
    ]
    return [confirmation_record(row) for row in sorted(rows, key=_id)]


def answered_confirmations(
    states: Iterable[SessionState], since: float | None, limit: int
) -> list[ConfirmationRecord]:
    rows = [
        row
        for state in states
        for row in state.confirmations.values()
        if row["status"] != ConfirmationStatus.PENDING
        and (since is None or row["resolved_at"] >= since)
    ]
    rows.sort(key=lambda row: (row["resolved_at"], _id(row)), reverse=True)
    return [confirmation_record(row) for row in rows[:limit]]


def resolve_confirmation(
    state: SessionState | None,
    ids: RowIds,
    confirmation_id: str,
    answer: Rows,
    follow_up: Rows,
    new_events: Sequence[EventRow],
    *,
    before_write: Callable[[], None] = lambda: None,
) -> tuple[TurnRecord, int]:
    """As `sql_ledgers.resolve_confirmation`: answer, queue the follow-up turn, log the events
    (`before_write` runs once every check has passed)."""
    row = state.confirmations.get(confirmation_id) if state is not None else None
    if state is None or row is None or row["status"] != ConfirmationStatus.PENDING:
        raise ResumeConflictError(f"confirmation {confirmation_id!r} is not pending")
    if state.status == SessionStatus.SUSPENDED:
        raise SessionSuspendedError(suspended_message(state.key, state.pending))
    if follow_up["turn_id"] in state.turns:
        raise ResumeConflictError(f"turn {follow_up['turn_id']!r} exists already")
    before_write()
    row.update(answer)
    state.updated_at = float(answer["resolved_at"])
    state.drop_request_timers(TimerKind.CONFIRMATION.value, row["turn_id"], confirmation_id)
    turn = {**follow_up, "id": ids.next("turns"), "generation": state.generation}
    state.turns[turn["turn_id"]] = turn
    return turn_record(turn), state.append_events(new_events)


# -- receipts -----------------------------------------------------------------------------------


def get_receipt(state: SessionState | None, key: str) -> ReceiptRecord | None:
    row = state.receipts.get(key) if state is not None else None
    return None if row is None else receipt_record(row)


def prepare_receipt(state: SessionState, ids: RowIds, receipt: ReceiptRecord) -> ReceiptRecord:
    existing = state.receipts.get(receipt.key)
    if existing is None:
        values = {**prepared_receipt(receipt, attempt=1), "id": ids.next("receipts")}
    elif existing["status"] == ReceiptStatus.FAILED:
        attempt = int(existing["attempt"]) + 1
        values = {**prepared_receipt(receipt, attempt=attempt), "id": existing["id"]}
    else:
        raise StepConflictError(receipt_conflict(receipt.key, existing["status"]))
    state.receipts[receipt.key] = values
    return receipt_record(values)


def settle_receipt(
    state: SessionState | None,
    key: str,
    receipt_id: str,
    status: ReceiptStatus,
    value: JsonValue,
    error: str | None,
    from_statuses: Sequence[ReceiptStatus],
    now: float,
) -> ReceiptRecord:
    row = state.receipts.get(key) if state is not None else None
    allowed = {ReceiptStatus(s).value for s in from_statuses}
    if row is None or row["receipt_id"] != receipt_id or row["status"] not in allowed:
        wanted = ", ".join(sorted(allowed))
        raise StepConflictError(f"receipt {receipt_id!r} for {key!r} is not in ({wanted})")
    row.update(receipt_outcome(status, value, error, now))
    return receipt_record(row)


def list_receipts(
    states: Iterable[SessionState], status: ReceiptStatus | None
) -> list[ReceiptRecord]:
    wanted = None if status is None else ReceiptStatus(status).value
    rows = [
        row
        for state in states
        for row in state.receipts.values()
        if wanted in (None, row["status"])
    ]
    return [receipt_record(row) for row in sorted(rows, key=_id)]


# -- facts --------------------------------------------------------------------------------------


def fact_history(state: SessionState | None, key: str) -> list[FactRecord]:
    rows = [row for (k, _), row in state.facts.items() if k == key] if state is not None else []
    return [fact_record(row) for row in sorted(rows, key=lambda row: int(row["version"]))]


def _id(row: Rows) -> Any:
    return int(row["id"])
