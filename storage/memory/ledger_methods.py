"""`MemoryStore`'s confirmations, effect receipts and facts: the ledgers a turn keeps beside its
transcript, each call atomic under the store's one lock as a SQL transaction would be. Apart from
the turns, leases and retention (`storage.memory.store`) because they share only that lock and
the session rows; the row logic itself is `storage.memory.ledgers`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from agent.seams import (
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    JsonValue,
    Lease,
    ReceiptRecord,
    ReceiptStatus,
    StoreHandle,
    TurnEvent,
    TurnInput,
    TurnKind,
    TurnRecord,
)
from storage.ledger_records import confirmation_answer, confirmation_record
from storage.memory import ledgers
from storage.memory.state import NoHandle, RowIds, SessionState
from storage.records import encode_events, new_turn, numbered


class LedgerMethods:
    """Mixed into `MemoryStore`, which owns the state below and fences leases."""

    _lock: asyncio.Lock
    _sessions: dict[str, SessionState]
    _ids: RowIds

    def _fence(self, lease: Lease) -> SessionState:
        raise NotImplementedError

    # -- confirmations ---------------------------------------------------------

    async def get_confirmation(
        self, session: str, confirmation_id: str
    ) -> ConfirmationRecord | None:
        async with self._lock:
            state = self._sessions.get(session)
            row = state.confirmations.get(confirmation_id) if state else None
            return None if row is None else confirmation_record(row)

    async def list_confirmations(
        self, session: str, status: ConfirmationStatus | None = None
    ) -> list[ConfirmationRecord]:
        async with self._lock:
            return ledgers.list_confirmations(self._sessions.get(session), status)

    async def pending_confirmations(self) -> list[ConfirmationRecord]:
        async with self._lock:
            return ledgers.pending_confirmations(self._sessions.values())

    async def answered_confirmations(
        self, since: float | None = None, limit: int = 100
    ) -> list[ConfirmationRecord]:
        async with self._lock:
            return ledgers.answered_confirmations(self._sessions.values(), since, limit)

    async def resolve_confirmation(
        self,
        session: str,
        confirmation_id: str,
        *,
        accepted: bool,
        by: str | None,
        follow_up_turn: str,
        follow_up: TurnInput,
        events: Sequence[TurnEvent],
        now: float,
        status: ConfirmationStatus | None = None,
        reason: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
        approved_arguments: dict[str, Any] | None = None,
    ) -> tuple[TurnRecord, list[TurnEvent]]:
        rows = encode_events(session, events)
        answer = confirmation_answer(
            accepted,
            by,
            follow_up_turn,
            now,
            status=status,
            reason=reason,
            approved_arguments=approved_arguments,
        )
        turn = new_turn(
            session, follow_up_turn, follow_up.model_dump_json(), kind=TurnKind.TURN, now=now
        )
        async with self._lock:
            record, last_seq = ledgers.resolve_confirmation(
                self._sessions.get(session),
                self._ids,
                confirmation_id,
                answer,
                turn,
                rows,
                before_write=run_alongside(alongside),
            )
        return record, numbered(events, last_seq)

    async def get_receipt(self, session: str, key: str) -> ReceiptRecord | None:
        async with self._lock:
            return ledgers.get_receipt(self._sessions.get(session), key)

    async def prepare_receipt(
        self, lease: Lease, receipt: ReceiptRecord, ttl: float, now: float
    ) -> ReceiptRecord:
        if receipt.session != lease.session:
            raise ValueError(f"receipt for {receipt.session!r} prepared under {lease.session!r}")
        async with self._lock:
            state = self._fence(lease)
            prepared = ledgers.prepare_receipt(state, self._ids, receipt)
            state.lease_expires_at = now + ttl
            return prepared

    async def settle_receipt(
        self,
        session: str,
        key: str,
        receipt_id: str,
        status: ReceiptStatus,
        *,
        value: JsonValue = None,
        error: str | None = None,
        from_statuses: Sequence[ReceiptStatus] = (ReceiptStatus.PREPARED,),
        now: float,
    ) -> ReceiptRecord:
        async with self._lock:
            return ledgers.settle_receipt(
                self._sessions.get(session),
                key,
                receipt_id,
                status,
                value,
                error,
                from_statuses,
                now,
            )

    async def list_receipts(
        self, *, session: str | None = None, status: ReceiptStatus | None = None
    ) -> list[ReceiptRecord]:
        async with self._lock:
            if session is None:
                states = list(self._sessions.values())
            else:
                states = [s for s in (self._sessions.get(session),) if s is not None]
            return ledgers.list_receipts(states, status)

    async def get_fact(self, session: str, key: str) -> FactRecord | None:
        async with self._lock:
            history = ledgers.fact_history(self._sessions.get(session), key)
        return history[-1] if history else None

    async def fact_history(self, session: str, key: str) -> list[FactRecord]:
        async with self._lock:
            return ledgers.fact_history(self._sessions.get(session), key)


def run_alongside(alongside: Callable[[StoreHandle], None] | None) -> Callable[[], None]:
    """The application's write, run once every check has passed and before anything changes:
    nothing here can be rolled back, so a failing write must come first."""

    def run() -> None:
        if alongside is not None:
            alongside(NoHandle())

    return run
