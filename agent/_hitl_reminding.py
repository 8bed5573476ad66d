"""Firing reminders and escalations, and who may answer once an escalation fired.

A due `remind` or `escalate` timer (`agent._hitl_reminders`) is fired by whichever process sweeps
it first, as an expiry is (`agent._hitl_expiry.expire_due`): `FollowUps.fire_timer` claims it
and logs its event (`approval.reminded`, `approval.escalated`) in one transaction, so however many
clocks and workers sweep, each fires once, and none fires after the request ended (its end deletes
the row). A surface shows the event: Slack reminds in the thread, and on escalation posts the
request's buttons again, to its new answerers.

An escalation's answerers may answer from the moment it fired: every answer path asks
`escalated_answerers` and checks the person against the request's own answerers first and then
each escalation's (`authorize_widened`, `grant_widened`). The request itself does not change (its
digest, its quorum, its buttons already posted), so a person who could answer still can.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

from agent._errors import ResumeAuthorizationError
from agent._events import ApprovalEscalated, ApprovalReminded, TurnEvent
from agent._hitl_answerers import Answerer
from agent._hitl_checks import AuthorizeAnswer, Grant, Principal, authorize, issue_grant
from agent._hitl_requests import parked_requests
from agent._records import ApprovalTimer, ConfirmationStatus, SessionStatus, TimerAction
from agent.seams import SessionStore, TimerKind

log = logging.getLogger(__name__)


async def fire_follow_up(store: SessionStore, timer: ApprovalTimer, now: float) -> list[TurnEvent]:
    """Fire one due reminder or escalation; the events logged (`[]`: another process fired it
    first, or its request ended, in which case its leftover timers are dropped)."""
    waiting, answerers = await _waiting_answerers(store, timer)
    if not waiting:
        await store.drop_timer(timer)  # the request ended without taking its timers
        return []
    kind: Literal["input", "confirmation"] = (
        "input" if timer.kind == TimerKind.INPUT else "confirmation"
    )
    event: TurnEvent
    if timer.action == TimerAction.ESCALATE:
        if timer.answerers is None:  # written by this engine only with answerers
            log.warning("escalation without answerers dropped", extra={"session": timer.session})
            await store.drop_timer(timer)
            return []
        event = ApprovalEscalated(
            session=timer.session,
            turn_id=timer.turn_id,
            kind=kind,
            request_id=timer.request_id,
            waited=timer.expires_after,
            answerers=timer.answerers,
        )
    else:
        event = ApprovalReminded(
            session=timer.session,
            turn_id=timer.turn_id,
            kind=kind,
            request_id=timer.request_id,
            waited=timer.expires_after,
            answerers=answerers,
        )
    return await store.fire_timer(timer, now, [event])


async def _waiting_answerers(
    store: SessionStore, timer: ApprovalTimer
) -> tuple[bool, Answerer | None]:
    """Whether the timer's request still waits, and its own answerers (None: no restriction)."""
    if timer.kind == TimerKind.INPUT:
        session = await store.get_session(timer.session)
        if session is None or session.status != SessionStatus.SUSPENDED:
            return False, None
        for request in parked_requests(session.pending):
            if (request.turn_id, request.id) == (timer.turn_id, timer.request_id):
                return True, request.answerers
        return False, None
    record = await store.get_confirmation(timer.session, timer.request_id)
    if record is None or record.status != ConfirmationStatus.PENDING:
        return False, None
    return True, record.answerers


async def escalated_answerers(
    store: SessionStore, session: str, kind: TimerKind, turn_id: str, request_id: str
) -> list[Answerer]:
    """Who else may answer the request: the answerers of its escalations that fired."""
    fired = await store.fired_escalations(session, kind, turn_id, request_id)
    return [timer.answerers for timer in fired if timer.answerers is not None]


def authorize_widened(
    answerers: Answerer | None,
    escalated: Sequence[Answerer],
    *,
    by: str | None,
    granted: Grant | None,
    digest: str,
) -> None:
    """`authorize` against the request's answerers, then each escalation's; the request's own
    refusal is the one raised when none admits the person."""
    try:
        authorize(answerers, by=by, granted=granted, digest=digest)
    except ResumeAuthorizationError:
        for extra in escalated:
            try:
                authorize(extra, by=by, granted=granted, digest=digest)
            except ResumeAuthorizationError:
                continue
            return
        raise


async def grant_widened(
    answerers: Answerer | None,
    escalated: Sequence[Answerer],
    *,
    by: str | None,
    principal: Principal | None,
    digest: str,
    authorize_answer: AuthorizeAnswer | None,
) -> Grant | None:
    """`issue_grant` for the request's answerers, then for each escalation's: the first grant
    the agent's hook gives, for the policy it was asked about."""
    for candidate in (answerers, *escalated):
        granted = await issue_grant(
            candidate,
            by=by,
            principal=principal,
            digest=digest,
            authorize_answer=authorize_answer,
        )
        if granted is not None:
            return granted
    return None
