"""The store's roles for turns: `TurnQueue` (the turn chain of each session) and `Approvals`
(parked turns, their answers, expiry timers and who may answer them)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from agent._events import TurnEvent
from agent._messages import JsonValue
from agent._records import (
    ApprovalTimer,
    ArchivedGeneration,
    ConfirmationRecord,
    Lease,
    SessionRecord,
    TurnRecord,
)
from agent._step_seam import StoreHandle
from agent._turn_input import TurnInput


class TurnQueue(Protocol):
    """The turn chain of each session: queueing turns and resets, cancelling, applying a reset
    and reading what it archived, and the turns and sessions as committed (per session, and
    across sessions for recovery and operators). Its contract: tests/contract/test_turn_queue.py
    (and the plain queueing in test_session_store.py)."""

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

    async def open_turns(self) -> list[TurnRecord]:
        """Queued, running and suspended turns of every session (for `bot check`)."""
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

    async def recoverable_sessions(self, now: float) -> list[str]:
        """Sessions with queued or running turns whose lease is free or expired."""
        ...


class Approvals(Protocol):
    """Parked turns and the people who answer them: the answer that resumes a park, stopping a
    session (parks too), the expiry timers committed with each request, and the queries across
    sessions behind who may answer what. Its contract: tests/contract/test_approval_store.py."""

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
        still_pending: JsonValue = None,
        request_id: str | None = None,
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

        `still_pending`: when other requests of the same park still wait (the calls of one
        batch that each asked), the checkpoint without the one answered. Then, with the same
        checks and the same steps and events, the turn stays `suspended`, the session stays
        `suspended` with `pending` set to it, and only the input timer of `request_id` is
        deleted. Two answers to different requests of a park race on `pending`: the loser is
        refused whole and may check again and retry (`AgentSession.resume` does).
        """
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

    async def list_parked(self) -> list[SessionRecord]:
        """Every session that is `suspended` on a request (its `pending` checkpoint set), in key
        order: what people may still answer across sessions (`Runtime.answerable`)."""
        ...

    async def pending_confirmations(self) -> list[ConfirmationRecord]:
        """Pending confirmations of every session, oldest first: what people may still answer
        (who may answer which is the runtime's question, `Runtime.answerable`)."""
        ...

    async def answered_confirmations(
        self, since: float | None = None, limit: int = 100
    ) -> list[ConfirmationRecord]:
        """Proposals of every session that were answered or expired (the audit, `bot approvals
        --history`), most recently resolved first, at most `limit`; with `since`, only those
        resolved at or after it. Each keeps its proposed `arguments` and, for an edited
        approval, the `approved_arguments` that ran."""
        ...

    async def recent_turns(self, speaker: str, limit: int) -> list[TurnRecord]:
        """The latest `limit` turns whose speaker is `speaker` (`TurnInput.speaker_key`, kept
        with the turn when it was queued), across sessions and generations, newest first."""
        ...
