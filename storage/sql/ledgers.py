"""Transaction bodies for confirmations, effect receipts and facts.

Each state change is a conditional UPDATE (from the state it must leave), so two racing writers
cannot both win: the loser's UPDATE matches no row and it raises, its transaction rolled back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agent.seams import (
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    JsonValue,
    Lease,
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
from storage.records import EventRow, event_rows, suspended_message, turn_record
from storage.sql.commit import fence, insert_many, stamped
from storage.sql.schema import (
    approval_timers,
    confirmations,
    events,
    facts,
    receipts,
    sessions,
    turns,
)

# -- confirmations ------------------------------------------------------------------------------


def get_confirmation(
    conn: Connection, session: str, confirmation_id: str
) -> ConfirmationRecord | None:
    query = select(confirmations).where(
        confirmations.c.session_key == session,
        confirmations.c.confirmation_id == confirmation_id,
    )
    row = conn.execute(query).first()
    return None if row is None else confirmation_record(row._mapping)


def list_confirmations(
    conn: Connection, session: str, status: ConfirmationStatus | None
) -> list[ConfirmationRecord]:
    query = select(confirmations).where(confirmations.c.session_key == session)
    if status is not None:
        query = query.where(confirmations.c.status == ConfirmationStatus(status).value)
    rows = conn.execute(query.order_by(confirmations.c.id)).mappings()
    return [confirmation_record(row) for row in rows]


def pending_confirmations(conn: Connection) -> list[ConfirmationRecord]:
    query = select(confirmations).where(confirmations.c.status == ConfirmationStatus.PENDING.value)
    rows = conn.execute(query.order_by(confirmations.c.id)).mappings()
    return [confirmation_record(row) for row in rows]


def answered_confirmations(
    conn: Connection, since: float | None, limit: int
) -> list[ConfirmationRecord]:
    query = select(confirmations).where(confirmations.c.status != ConfirmationStatus.PENDING.value)
    if since is not None:
        query = query.where(confirmations.c.resolved_at >= since)
    query = query.order_by(confirmations.c.resolved_at.desc(), confirmations.c.id.desc())
    return [confirmation_record(row) for row in conn.execute(query.limit(limit)).mappings()]


def resolve_confirmation(
    conn: Connection,
    confirmation_id: str,
    answer: dict[str, Any],
    follow_up: dict[str, Any],
    new_events: Sequence[EventRow],
) -> tuple[TurnRecord, int]:
    """Answer, queue `follow_up` (a `records.new_turn` row) and log `new_events`; returns the
    queued turn and the last event seq. The session row is updated first: it locks the session
    (so no park can commit in between) and reserves the event seqs in the same statement."""
    session = follow_up["session_key"]
    state = conn.execute(
        update(sessions)
        .where(sessions.c.key == session)
        .values(event_seq=sessions.c.event_seq + len(new_events), updated_at=answer["resolved_at"])
        .returning(
            sessions.c.status, sessions.c.pending, sessions.c.generation, sessions.c.event_seq
        )
    ).first()
    answered = 0
    if state is not None:
        answered = conn.execute(
            update(confirmations)
            .where(
                confirmations.c.session_key == session,
                confirmations.c.confirmation_id == confirmation_id,
                confirmations.c.status == ConfirmationStatus.PENDING.value,
            )
            .values(answer)
        ).rowcount
    if state is None or answered != 1:
        raise ResumeConflictError(f"confirmation {confirmation_id!r} is not pending")
    if state.status == SessionStatus.SUSPENDED:
        raise SessionSuspendedError(suspended_message(session, state.pending))
    values = {**follow_up, "generation": state.generation}
    try:
        created = conn.execute(insert(turns).values(values).returning(turns.c.id)).scalar_one()
    except IntegrityError as err:
        raise ResumeConflictError(f"turn {follow_up['turn_id']!r} exists already") from err
    conn.execute(
        delete(approval_timers).where(
            approval_timers.c.session_key == session,
            approval_timers.c.kind == TimerKind.CONFIRMATION.value,
            approval_timers.c.request_id == confirmation_id,
        )
    )
    last_seq = int(state.event_seq)
    insert_many(conn, events, stamped(event_rows(session, new_events, last_seq)))
    return turn_record({**values, "id": created}), last_seq


# -- receipts -----------------------------------------------------------------------------------


def get_receipt(conn: Connection, session: str, key: str) -> ReceiptRecord | None:
    query = select(receipts).where(receipts.c.session_key == session, receipts.c.key == key)
    row = conn.execute(query).first()
    return None if row is None else receipt_record(row._mapping)


def prepare_receipt(
    conn: Connection, lease: Lease, receipt: ReceiptRecord, ttl: float, now: float
) -> ReceiptRecord:
    fence(conn, lease, ttl, now)
    existing = get_receipt(conn, lease.session, receipt.key)
    if existing is None:
        values = prepared_receipt(receipt, attempt=1)
        try:
            conn.execute(insert(receipts).values(values))
        except IntegrityError as err:
            raise StepConflictError(receipt_conflict(receipt.key, "concurrent")) from err
        return receipt_record(values)
    if existing.status != ReceiptStatus.FAILED:
        raise StepConflictError(receipt_conflict(receipt.key, existing.status.value))
    values = prepared_receipt(receipt, attempt=existing.attempt + 1)
    retried = conn.execute(
        update(receipts)
        .where(
            receipts.c.session_key == lease.session,
            receipts.c.key == receipt.key,
            receipts.c.receipt_id == existing.receipt_id,
            receipts.c.status == ReceiptStatus.FAILED.value,
        )
        .values(values)
    ).rowcount
    if retried != 1:
        raise StepConflictError(receipt_conflict(receipt.key, "concurrently changed"))
    return receipt_record(values)


def settle_receipt(
    conn: Connection,
    session: str,
    key: str,
    receipt_id: str,
    status: ReceiptStatus,
    value: JsonValue,
    error: str | None,
    from_statuses: Sequence[ReceiptStatus],
    now: float,
) -> ReceiptRecord:
    stmt = (
        update(receipts)
        .where(
            receipts.c.session_key == session,
            receipts.c.key == key,
            receipts.c.receipt_id == receipt_id,
            receipts.c.status.in_([ReceiptStatus(s).value for s in from_statuses]),
        )
        .values(receipt_outcome(status, value, error, now))
        .returning(*receipts.c)
    )
    row = conn.execute(stmt).first()
    if row is None:
        wanted = ", ".join(ReceiptStatus(s).value for s in from_statuses)
        raise StepConflictError(
            f"receipt {receipt_id!r} for {key!r} on session {session!r} is not in ({wanted})"
        )
    return receipt_record(row._mapping)


def list_receipts(
    conn: Connection, session: str | None, status: ReceiptStatus | None
) -> list[ReceiptRecord]:
    query = select(receipts)
    if session is not None:
        query = query.where(receipts.c.session_key == session)
    if status is not None:
        query = query.where(receipts.c.status == ReceiptStatus(status).value)
    return [receipt_record(row) for row in conn.execute(query.order_by(receipts.c.id)).mappings()]


# -- facts --------------------------------------------------------------------------------------


def get_fact(conn: Connection, session: str, key: str) -> FactRecord | None:
    query = (
        select(facts)
        .where(facts.c.session_key == session, facts.c.key == key)
        .order_by(facts.c.version.desc())
        .limit(1)
    )
    row = conn.execute(query).first()
    return None if row is None else fact_record(row._mapping)


def fact_history(conn: Connection, session: str, key: str) -> list[FactRecord]:
    query = (
        select(facts)
        .where(facts.c.session_key == session, facts.c.key == key)
        .order_by(facts.c.version)
    )
    return [fact_record(row) for row in conn.execute(query).mappings()]
