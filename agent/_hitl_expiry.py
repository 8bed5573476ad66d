"""Expiry of requests nobody answered: a durable timer, applied through the answer path.

A request with a time limit (`ctx.request_input(expires_after=)`, a confirmation of a tool or
agent with one) commits an `ApprovalTimer` row with the request itself. Nothing waits in
memory: every process that runs turns sweeps due timers with its recovery sweep, and the clock
process calls `Runtime.expire_due`, so a timer fires even if the process that parked the turn
is gone. Applying one is the same conditional write a person's answer makes (`resume_turn`,
`resolve_confirmation`, each of which deletes the timer): it applies only while the request is
still pending, so of an expiry and an answer, or of two sweeping processes, exactly one wins,
and the loser changes nothing. That conditional write is the claim and its fence.

An expired request is answered with an expiry note instead of an answer (the tool's
`request_input` raises `RequestExpiredError`, and the model reads that it expired); its siblings
in the same park, if any, still wait, and the turn resumes when none does. An expired
confirmation is resolved `expired` and queues the turn that tells the model, as a denial does.

The same sweep fires a request's reminder and escalation timers (`agent._hitl_reminding`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from agent._errors import ResumeError, SessionSuspendedError, StoreUnavailableError
from agent._events import ConfirmationResolved, InputResolved
from agent._hitl_answer_notes import confirmation_follow_up, expired_note, note_step_id
from agent._hitl_checks import answer_step_id, workspace_of
from agent._hitl_reminding import fire_follow_up
from agent._hitl_requests import parked_requests, without_request
from agent._sinks import EventHub
from agent.seams import (
    ApprovalTimer,
    ConfirmationStatus,
    SessionStatus,
    SessionStore,
    TimerAction,
    TimerKind,
)

log = logging.getLogger("agent._expiry")
"""The name it logged under before the `_hitl_` rename, so operators' log filters still match."""

SWEEP_BATCH = 100
"""Timers applied per sweep at most; the rest wait for the next one (seconds later)."""


class ExpiryHost(Protocol):
    """What applying timers needs of the runtime (`agent._runtime.Runtime` has it)."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def hub(self) -> EventHub: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    def kick(self, key: str) -> None: ...


async def expire_due(host: ExpiryHost, now: float) -> int:
    """Apply every timer due at `now`; returns how many requests this call expired.

    A timer another process applied first, or whose request was answered meanwhile, is a
    refusal of the conditional write and counts for nothing. A confirmation cannot be
    resolved while its session is parked on another turn (nothing can queue there); its timer
    stays and a later sweep applies it. The database being away propagates (the caller's
    sweep logs it and tries again); any other failure of one timer is logged and the rest go on.
    """
    applied = 0
    for timer in await host.store.due_timers(now, SWEEP_BATCH):
        try:
            if timer.action != TimerAction.EXPIRE:
                await _follow_up(host, timer, now)
                continue
            if timer.kind == TimerKind.INPUT:
                done = await _expire_input(host, timer)
            else:
                done = await _expire_confirmation(host, timer, now)
        except (ResumeError, SessionSuspendedError):
            continue  # lost the race, or not now: nothing changed
        except StoreUnavailableError:
            raise
        except Exception:
            log.exception(
                "could not expire %s %s of %s", timer.kind, timer.request_id, timer.session
            )
            continue
        applied += int(done)
    return applied


async def _follow_up(host: ExpiryHost, timer: ApprovalTimer, now: float) -> None:
    """A reminder or an escalation (`agent._hitl_reminding`): fired here once, whichever
    process sweeps it first; not counted as an expiry."""
    for event in await fire_follow_up(host.store, timer, now):
        await host.hub.emit(event)
        log.info(
            "request %s",
            event.type.removeprefix("approval."),
            extra={"session": timer.session, "request": timer.request_id},
        )


async def _expire_input(host: ExpiryHost, timer: ApprovalTimer) -> bool:
    session = await host.store.get_session(timer.session)
    pending = session.pending if session is not None else None
    request = next(
        (
            waiting
            for waiting in parked_requests(pending)
            if (waiting.turn_id, waiting.id) == (timer.turn_id, timer.request_id)
        ),
        None,
    )
    if session is None or session.status != SessionStatus.SUSPENDED or request is None:
        await host.store.drop_timer(timer)  # the park ended without it: nothing to expire
        return False
    resolved = InputResolved(
        session=timer.session,
        turn_id=timer.turn_id,
        input_id=timer.request_id,
        outcome="expired",
    )
    events = await host.store.resume_turn(
        timer.session,
        timer.turn_id,
        expected_pending=pending,
        answer_step=answer_step_id(timer.turn_id, timer.request_id),
        answer=None,
        notes={note_step_id(timer.turn_id, timer.request_id): expired_note(timer.expires_after)},
        events=[resolved],
        still_pending=without_request(pending, request),
        request_id=request.id,
    )
    for event in events:
        await host.hub.emit(event)
    host.kick(timer.session)
    return True


async def _expire_confirmation(host: ExpiryHost, timer: ApprovalTimer, now: float) -> bool:
    record = await host.store.get_confirmation(timer.session, timer.request_id)
    if record is None or record.status != ConfirmationStatus.PENDING:
        await host.store.drop_timer(timer)
        return False
    proposing = await host.store.get_turn(timer.session, record.turn_id)
    workspace = workspace_of(proposing.input if proposing is not None else None)
    follow_up = f"confirm:{record.confirmation_id}"
    resolved = ConfirmationResolved(
        session=timer.session,
        turn_id=follow_up,
        confirmation_id=record.confirmation_id,
        accepted=False,
        outcome="expired",
    )
    _, events = await host.store.resolve_confirmation(
        timer.session,
        record.confirmation_id,
        accepted=False,
        by=None,
        follow_up_turn=follow_up,
        follow_up=confirmation_follow_up(
            record, status=ConfirmationStatus.EXPIRED, by=None, reason=None, workspace=workspace
        ),
        events=[resolved],
        now=now,
        status=ConfirmationStatus.EXPIRED,
    )
    for event in events:
        await host.hub.emit(event)
    host.kick(timer.session)
    return True
