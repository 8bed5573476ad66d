"""The store seam: `SessionStore`, everything the engine persists goes through it, and
`StoreHandle`, what a local tool gets to write in the step's transaction."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from agent._events import TurnEvent
from agent._messages import JsonValue, Message
from agent._records import (
    ApprovalTimer,
    ArchivedGeneration,
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    Lease,
    PruneCounts,
    ReceiptRecord,
    ReceiptStatus,
    SessionRecord,
    StepCommit,
    TranscriptTail,
    TurnRecord,
)
from agent._turn_input import TurnInput

_R = TypeVar("_R")


class StoreHandle(Protocol):
    """What a local tool gets as `ctx.store`."""

    def unwrap(self) -> Any:
        """The backend's own handle joined to the step's transaction (a SQLAlchemy `Connection`).

        Raises `FatalToolError` where the backend has none, so a write never goes nowhere.
        """
        ...


class SessionStore(Protocol):
    async def enqueue_turn(
        self,
        session: str,
        turn_id: str,
        input: TurnInput,
        *,
        cancel_unfinished: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> tuple[TurnRecord, bool]:
        """Durably queue a turn, or return the existing one; the bool says it was created.

        Raises `SessionSuspendedError` if the session is parked on a different turn, unless a
        reset is pending (it will cancel the park, so the turn queues behind it); the check and
        the insert are one transaction. With `cancel_unfinished`, every queued or running turn of
        the session is asked to cancel with that reason in the same transaction (replace); a
        parked turn is never touched. Nothing is cancelled when the turn id already exists.

        `alongside`: the application's own write, run in that same transaction (also when the
        turn already existed; not when the session refuses it), so what it records about the turn
        exists exactly when the turn does, at the price of no extra commit. It gets the store's
        handle, as a local tool does; if it raises, nothing is queued.
        """
        ...

    async def enqueue_reset(self, session: str, reset_id: str) -> TurnRecord:
        """Queue a reset (kind `reset`) on the turn chain; idempotent by id.

        Allowed while the session is parked (a stale park is how people get out of an approval
        nobody will answer). In the same transaction every queued or running turn is asked to
        cancel with reason `reset`.
        """
        ...

    async def apply_reset(
        self, lease: Lease, reset_id: str, events: Sequence[TurnEvent], ttl: float, now: float
    ) -> tuple[int, list[TurnEvent]]:
        """Fenced, one transaction: archive messages, steps, events and facts under the current
        generation, clear them from the live tables, end a parked turn as cancelled (`reset`),
        expire pending confirmations, clear `pending`, status `new`, generation + 1, and complete
        the reset turn with result
        `{"status": "completed", "archived_generation": g, "generation": g + 1}`. Returns the
        archived generation number and `events` numbered (event seqs never restart)."""
        ...

    async def read_archive(self, session: str, generation: int) -> ArchivedGeneration:
        """The rows a reset archived under `generation` (empty lists if there were none)."""
        ...

    async def request_cancel(self, session: str, turn_id: str, reason: str) -> TurnRecord | None:
        """Durably ask a queued or running turn to stop; None if it is finished or parked.

        The first reason stands; asking again changes nothing.
        """
        ...

    async def stop_session(
        self,
        session: str,
        *,
        reason: str,
        by: str | None,
        now: float,
        ended_park: Callable[[JsonValue], Sequence[TurnEvent]] | None = None,
    ) -> tuple[list[TurnRecord], list[TurnEvent]]:
        """Durably stop every unfinished turn of the session, parked ones too, in one
        transaction; returns the turns this call asked to stop and the events it logged.

        Every queued or running turn (kind `turn`) with no cancel asked yet gets `reason` and
        `by` (`TurnRecord.cancelled_by`); one already asked keeps its first reason. If the
        session is suspended, its park ends here: the parked turn is queued again with the
        cancel asked (so whichever worker picks it up ends it as cancelled, giving the parked
        call the synthetic `{"cancelled": true}` result), `pending` is cleared, the status is
        `running`, the park's expiry timer is deleted, and `ended_park(pending)`'s events
        (given the checkpoint as it was) are appended to the log, numbered. A later answer to
        that park is then a `ResumeConflictError`. Reset turns are never touched. An unknown
        session stops nothing.
        """
        ...

    async def resume_turn(
        self,
        session: str,
        turn_id: str,
        *,
        expected_pending: JsonValue,
        answer_step: str,
        answer: JsonValue,
        notes: Mapping[str, JsonValue] | None = None,
        events: Sequence[TurnEvent] = (),
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> list[TurnEvent]:
        """Apply an answer to a parked turn, atomically or not at all; returns `events` numbered.

        In one transaction: the session is `suspended` with `pending` equal to
        `expected_pending`, and no reset is queued; store `answer` as step `answer_step` of the
        turn (and each of `notes` as a step of its own: who answered and why, or that the
        request expired), set the turn back to `queued` and the session to `running`, clear
        `pending`, delete the turn's input expiry timers and append `events` to the log.
        Otherwise raise `ResumeConflictError` and change nothing. Of two racing resumes of the
        same request exactly one succeeds; so an expiry racing a person's answer either applies
        or is refused whole. `alongside`: as for `enqueue_turn`, the application's write in the
        same transaction (run only when the answer is applied; if it raises, nothing is).
        """
        ...

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

    async def pending_confirmations(self) -> list[ConfirmationRecord]:
        """Pending confirmations of every session, oldest first: what people may still answer
        (who may answer which is the runtime's question, `Runtime.answerable`)."""
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
    ) -> tuple[TurnRecord, list[TurnEvent]]:
        """Answer a pending confirmation and queue the turn that acts on the answer, atomically.

        The status recorded is `status` if given (`expired`: nobody answered in time), else
        `accepted` or `denied`; `reason` is stored with it. The confirmation's expiry timer is
        deleted in the same transaction. Raises `ResumeConflictError` if it is not pending
        (answered or expired already, unknown) and `SessionSuspendedError` if the session is
        parked; in both cases nothing changes. `events` are appended to the session's log
        (numbered) in the same transaction, and `alongside` (as for `enqueue_turn`) runs in it
        when the answer is applied.
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

    async def open_turns(self) -> list[TurnRecord]:
        """Queued, running and suspended turns of every session (for `bot check`)."""
        ...

    async def list_parked(self) -> list[SessionRecord]:
        """Every session that is `suspended` on a request (its `pending` checkpoint set), in key
        order: what people may still answer across sessions (`Runtime.answerable`)."""
        ...

    async def open_work(self) -> list[tuple[SessionRecord, list[TurnRecord]]]:
        """Every session with a queued, running or suspended turn, with those turns in queue
        order; sessions in key order. For operators (`bot turns --stuck`): each turn's status
        and its session's lease (and `updated_at`) are read in one statement, so they agree: a
        turn is never shown running under a lease its worker released after finishing it."""
        ...

    async def failure_streaks(self, at_least: int) -> list[list[TurnRecord]]:
        """For every session whose latest turns failed `at_least` times in a row or more, those
        failed turns, oldest first; sessions in key order. Only turns (not resets) of the live
        generation count; the streak is the failed turns after the latest one that completed,
        was cancelled or parked (queued and running turns neither end nor extend it). For
        operators: a conversation every message of which fails needs a person."""
        ...

    async def recent_turns(self, speaker: str, limit: int) -> list[TurnRecord]:
        """The latest `limit` turns whose speaker is `speaker` (`TurnInput.speaker_key`, kept
        with the turn when it was queued), across sessions and generations, newest first."""
        ...

    async def due_timers(self, now: float, limit: int = 100) -> list[ApprovalTimer]:
        """Expiry timers due at `now` (`due_at <= now`), earliest first, at most `limit`.

        A read: applying one is the answer path's own conditional write (`resume_turn`,
        `resolve_confirmation`), which deletes it, so of two processes sweeping the same timer
        exactly one applies it."""
        ...

    async def drop_timer(self, timer: ApprovalTimer) -> None:
        """Delete a timer whose request ended without deleting it (nothing to expire)."""
        ...

    async def get_turn(self, session: str, turn_id: str) -> TurnRecord | None:
        """The turn as committed, or None."""
        ...

    async def next_turn(self, session: str) -> TurnRecord | None:
        """The oldest queued or running turn of the session, in the order they were queued."""
        ...

    async def list_turns(self, session: str) -> list[TurnRecord]:
        """Every turn of the live generation, in queue order."""
        ...

    async def get_session(self, session: str) -> SessionRecord | None:
        """The session row, or None if no turn was ever queued on it."""
        ...

    async def load_transcript(self, session: str) -> list[Message]:
        """The live transcript in index order (a host reading the conversation)."""
        ...

    async def load_transcript_tail(
        self, session: str, at_least: int, *, since_compaction: bool = False
    ) -> TranscriptTail:
        """What a worker reads when it picks a session up: the last `at_least` messages or more,
        from the opening of the turn the earliest of them belongs to (everything when the
        transcript is no longer). Its cost must not grow with the transcript: a resumed turn
        waits on it.

        `since_compaction=True` (the model's API compacts long threads): `at_least` is ignored;
        the tail starts at the opening of the turn holding the newest message that
        `holds_compaction`, or at the session's start if none does, however many messages that
        is (the API's compaction bounds it). Finding that message must not read the transcript:
        mark it when it is committed. The live generation only: a reset's archive keeps its own."""
        ...

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        """The memoized steps of one turn, keyed by step id, in commit order."""
        ...

    async def acquire_lease(self, session: str, owner: str, ttl: float, now: float) -> Lease | None:
        """Take the session's lease if it is free or expired, bumping its epoch; else None."""
        ...

    async def renew_lease(self, lease: Lease, ttl: float, now: float) -> bool:
        """Extend the lease; False if it was lost (the epoch moved on)."""
        ...

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease up if still held, so another worker need not wait for expiry."""
        ...

    async def commit(
        self, lease: Lease, commit: StepCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        """Commit one step atomically, fenced by the lease epoch, and return its events with seqs.

        Raises `LeaseLostError` (and commits nothing) if the lease epoch is no longer current.
        """
        ...

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], _R],
        build: Callable[[_R], StepCommit],
        ttl: float,
        now: float,
    ) -> tuple[_R, list[TurnEvent]]:
        """Run a local tool inside the step's transaction, then commit `build(result)` in it.

        If `run` raises, its writes are rolled back (where the backend can) and the exception
        propagates; nothing is committed.
        """
        ...

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        """Durable events with seq > after_seq, oldest first: catch-up for late subscribers."""
        ...

    async def recoverable_sessions(self, now: float) -> list[str]:
        """Sessions with queued or running turns whose lease is free or expired."""
        ...

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

    async def close(self) -> None:
        """Release connections."""
        ...
