"""The store's roles for what outlasts a step: `Ledgers` (confirmations, effect receipts,
facts) and `Retention` (pruning history and settled receipts)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from agent._events import TurnEvent
from agent._messages import JsonValue
from agent._records import (
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    Lease,
    PruneCounts,
    ReceiptRecord,
    ReceiptStatus,
    TurnRecord,
)
from agent._step_seam import StoreHandle
from agent._turn_input import TurnInput


class Ledgers(Protocol):
    """What tools leave besides the transcript, each with its own rules: confirmations (and the
    turn an answer queues), effect receipts, and versioned facts. Its contract:
    tests/contract/test_ledgers.py."""

    async def get_confirmation(
        self, session: str, confirmation_id: str
    ) -> ConfirmationRecord | None:
        """The confirmation, or None."""
        ...

    async def list_confirmations(
        self, session: str, status: ConfirmationStatus | None = None
    ) -> list[ConfirmationRecord]:
        """Confirmations of the session, oldest first."""
        ...

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
        """Answer a pending confirmation and queue the turn that acts on the answer, atomically.

        The status recorded is `status` if given (`expired`: nobody answered in time), else
        `accepted` or `denied`; `reason` is stored with it. The confirmation's expiry timer is
        deleted in the same transaction. Raises `ResumeConflictError` if it is not pending
        (answered or expired already, unknown) and `SessionSuspendedError` if the session is
        parked; in both cases nothing changes. `events` are appended to the session's log
        (numbered) in the same transaction, and `alongside` (as for `enqueue_turn`) runs in it
        when the answer is applied. `approved_arguments`: the call as the approver edited it
        (`ConfirmationRecord.approved_arguments`), stored with the answer.
        """
        ...

    async def get_receipt(self, session: str, key: str) -> ReceiptRecord | None:
        """The receipt for an effect key, or None."""
        ...

    async def prepare_receipt(
        self, lease: Lease, receipt: ReceiptRecord, ttl: float, now: float
    ) -> ReceiptRecord:
        """Fenced: commit a `prepared` receipt before the effect runs.

        Inserts it, or, when the key's receipt is `failed`, replaces it as a new attempt
        (attempt + 1). Raises `StepConflictError` if the key has a receipt in any other state.
        """
        ...

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
        """Move the receipt from one of `from_statuses` to `status`; `StepConflictError` if it is
        not in one of them. Not fenced: what happened at the provider is recorded even by a
        worker that lost its lease."""
        ...

    async def list_receipts(
        self, *, session: str | None = None, status: ReceiptStatus | None = None
    ) -> list[ReceiptRecord]:
        """Receipts across sessions (for operators), oldest first."""
        ...

    async def get_fact(self, session: str, key: str) -> FactRecord | None:
        """The latest version of a fact, or None."""
        ...

    async def fact_history(self, session: str, key: str) -> list[FactRecord]:
        """Every version of a fact, oldest first."""
        ...


class Retention(Protocol):
    """Removing what has outlived its use, in short batches, without touching what a live or
    parked session, a replayed turn id or an unsettled effect still needs. Its contract:
    tests/contract/test_prune.py."""

    async def prune_history(
        self,
        *,
        before: float,
        after: int = 0,
        limit: int = 500,
        dry_run: bool = False,
        delivered: Callable[[Sequence[str]], Awaitable[Mapping[str, int]]] | None = None,
        now: float | None = None,
    ) -> tuple[PruneCounts, int | None]:
        """One batch of retention, its own short transaction: returns what it removed and the
        `after` to pass next (None: nothing is left past this batch).

        It looks at the next `limit` turns not pruned yet that finished (completed, failed,
        cancelled) before `before`, in queue order after `TurnRecord.seq` `after`, and removes
        each one's steps and events; for a reset turn, also the archived generation it retired.
        Each turn's row stays (status, result), marked pruned, so a re-delivered turn id still
        replays its stored result and never runs again. Never touched: messages of the live
        generation (the transcript the model reads), facts, confirmations, receipts, and any
        session that is live or parked when the deleting transaction runs (a turn queued,
        running or suspended, a `pending` checkpoint, a pending confirmation): that check is
        made under the session row's lock, in the transaction that deletes, and such turns are
        counted as `held` and looked at again by a later prune.

        `delivered(sessions)`: how far each session's log has been delivered (a renderer's
        cursor); events past it are kept, and their turn is `held`. Sessions it does not name
        have no such limit. `dry_run`: count what would go and change nothing. Event seqs are
        never reused: the next event of a pruned session still follows the last one logged.
        """
        ...

    async def prune_receipts(
        self, *, before: float, after: int = 0, limit: int = 500, dry_run: bool = False
    ) -> tuple[int, int | None]:
        """One batch, its own transaction: remove up to `limit` effect receipts settled
        `completed` or `failed` before `before` (their `updated_at`), in id order after
        `after`, of sessions neither live nor parked; returns how many and the next `after`
        (None: none left). Receipts are what makes a reused effect key call nothing, so this
        runs only when an operator asks for it; `prepared` and `uncertain` ones are never
        removed (they wait for a person)."""
        ...
