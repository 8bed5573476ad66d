"""The `FollowUps` contract: a request's reminder and escalation timers are committed with it,
listed by `due_timers` until they fire, fired once (however many views race for them), never
after the request ended (its end deletes them with its expiry), and a fired escalation reads back
with its answerers until then. Run against `memory`, `sqlite` and `postgres`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    ApprovalEscalated,
    ApprovalReminded,
    InputRequest,
    InputRequested,
    InputResolved,
    SessionStore,
    UserAnswerer,
)
from agent.seams import (
    ApprovalTimer,
    ConfirmationStatus,
    SessionStatus,
    StepCommit,
    StepConflictError,
    TimerAction,
    TimerKind,
    TurnStatus,
)
from tests.contract.conftest import Reopen
from tests.contract.test_approval_store import NOW, S, _proposed, _resolve, _seqs, _timer
from tests.contract.test_approval_store import _running as _running_turn

BOSS = UserAnswerer(user="UBOSS")


def _follow_up(action: TimerAction, due_at: float, **kw: Any) -> ApprovalTimer:
    base = _timer(S, kw.pop("turn_id", "t1"), kw.pop("request_id", "approve"), due_at, **kw)
    answerers = BOSS if action == TimerAction.ESCALATE else None
    return ApprovalTimer(**{**base.__dict__, "action": action, "answerers": answerers})


def _event(timer: ApprovalTimer) -> ApprovalReminded | ApprovalEscalated:
    kind = "input" if timer.kind == TimerKind.INPUT else "confirmation"
    if timer.action == TimerAction.ESCALATE:
        assert timer.answerers is not None
        return ApprovalEscalated(
            session=timer.session,
            turn_id=timer.turn_id,
            kind=kind,
            request_id=timer.request_id,
            waited=timer.expires_after,
            answerers=timer.answerers,
        )
    return ApprovalReminded(
        session=timer.session,
        turn_id=timer.turn_id,
        kind=kind,
        request_id=timer.request_id,
        waited=timer.expires_after,
        answerers=UserAnswerer(user="U1"),
    )


async def _parked_with(store: SessionStore, *timers: ApprovalTimer) -> dict[str, Any]:
    """`t1` parked on `approve` with an expiry at 9,000 and `timers` beside it."""
    lease = await _running_turn(store, "t1")
    request = {
        "id": "approve",
        "prompt": "Ship it?",
        "schema": None,
        "answerers": {"user": "U1"},
        "turn_id": "t1",
        "call_id": "c1",
        "tool": "ship",
        "digest": "d1",
    }
    pending = {"turn_id": "t1", "request": request, "call_id": "c1", "parked_at": NOW}
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            step_id="park:t1:approve",
            step_value=pending,
            events=[
                InputRequested(
                    session=S, turn_id="t1", request=InputRequest.model_validate(request)
                )
            ],
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending=pending,
            timers=[_timer(S, "t1", "approve", 9_000.0), *timers],
        ),
        30.0,
        NOW,
    )
    await store.release_lease(lease)
    return pending


async def test_a_reminder_and_an_escalation_fire_once_each(store: SessionStore) -> None:
    remind = _follow_up(TimerAction.REMIND, 1_100.0)
    escalate = _follow_up(TimerAction.ESCALATE, 1_200.0)
    await _parked_with(store, remind, escalate)

    due = await store.due_timers(1_150.0)
    assert [(t.action, t.answerers) for t in due] == [(TimerAction.REMIND, None)]
    due = await store.due_timers(1_500.0)
    assert [t.action for t in due] == [TimerAction.REMIND, TimerAction.ESCALATE]
    assert (due[1].answerers, due[1].fired_at) == (BOSS, None)

    before = await _seqs(store)
    fired = await store.fire_timer(due[0], 1_500.0, [_event(due[0])])
    assert [(e.type, e.seq) for e in fired] == [("approval.reminded", before[-1][0] + 1)]
    assert (await _seqs(store))[-1] == (before[-1][0] + 1, "approval.reminded")
    assert await store.fire_timer(due[0], 1_600.0, [_event(due[0])]) == [], "once"
    assert await store.fired_escalations(S, TimerKind.INPUT, "t1", "approve") == []

    fired = await store.fire_timer(due[1], 1_500.0, [_event(due[1])])
    assert [e.type for e in fired] == ["approval.escalated"]
    [escalated] = await store.fired_escalations(S, TimerKind.INPUT, "t1", "approve")
    assert (escalated.answerers, escalated.fired_at) == (BOSS, 1_500.0)
    # Fired ones are not due again; the expiry still is, when its time comes.
    assert await store.due_timers(2_000.0) == []
    assert [t.action for t in await store.due_timers(9_000.0)] == [TimerAction.EXPIRE]
    assert await store.fired_escalations(S, TimerKind.INPUT, "t1", "other") == []


async def test_two_sweepers_racing_fire_a_timer_once(store: SessionStore, reopen: Reopen) -> None:
    remind = _follow_up(TimerAction.REMIND, 1_100.0)
    await _parked_with(store, remind)
    other = await reopen()
    [due] = await store.due_timers(1_100.0)
    results = await asyncio.gather(
        *(view.fire_timer(due, 1_100.0, [_event(due)]) for view in (store, other, store, other))
    )
    assert sorted(len(fired) for fired in results) == [0, 0, 0, 1]
    assert [t for _, t in await _seqs(store)].count("approval.reminded") == 1


async def test_the_end_of_a_park_takes_its_follow_ups_with_it(store: SessionStore) -> None:
    escalate = _follow_up(TimerAction.ESCALATE, 1_100.0)
    pending = await _parked_with(store, escalate, _follow_up(TimerAction.REMIND, 1_200.0))
    [due, _] = await store.due_timers(1_300.0)
    assert await store.fire_timer(due, 1_300.0, [_event(due)]) != []
    await store.resume_turn(
        S,
        "t1",
        expected_pending=pending,
        answer_step="input:t1:approve",
        answer=True,
        events=[InputResolved(session=S, turn_id="t1", input_id="approve", outcome="answered")],
        request_id="approve",
    )
    assert await store.due_timers(1e12) == []
    assert await store.fired_escalations(S, TimerKind.INPUT, "t1", "approve") == []
    logged = await _seqs(store)
    remind = _follow_up(TimerAction.REMIND, 1_200.0)
    assert await store.fire_timer(remind, 1_400.0, [_event(remind)]) == []
    assert await _seqs(store) == logged, "nothing fires for a request that ended"


async def test_a_resolved_proposal_takes_its_follow_ups_with_it(store: SessionStore) -> None:
    proposal = await _proposed(store, S, "t1")
    escalate = _follow_up(
        TimerAction.ESCALATE,
        1_100.0,
        kind=TimerKind.CONFIRMATION,
        request_id=proposal.confirmation_id,
    )
    lease = await _running_turn(store, "t2")
    await store.commit(lease, StepCommit(turn_id="t2", timers=[escalate]), 30.0, NOW)
    await store.release_lease(lease)
    assert await store.fire_timer(escalate, 1_100.0, [_event(escalate)]) != []
    confirmation = (S, TimerKind.CONFIRMATION, "t1", proposal.confirmation_id)
    assert [t.answerers for t in await store.fired_escalations(*confirmation)] == [BOSS]

    await _resolve(store, proposal, ConfirmationStatus.ACCEPTED)
    assert await store.fired_escalations(*confirmation) == []
    assert await store.due_timers(1e12) == []


async def test_one_timer_of_each_action_per_request(store: SessionStore) -> None:
    proposal = await _proposed(store, S, "t1")

    def remind(due_at: float) -> ApprovalTimer:
        return _follow_up(
            TimerAction.REMIND,
            due_at,
            kind=TimerKind.CONFIRMATION,
            request_id=proposal.confirmation_id,
        )

    lease = await _running_turn(store, "t2")
    await store.commit(lease, StepCommit(turn_id="t2", timers=[remind(1_100.0)]), 30.0, NOW)
    with pytest.raises(StepConflictError):
        await store.commit(lease, StepCommit(turn_id="t2", timers=[remind(1_300.0)]), 30.0, NOW)
    due = await store.due_timers(1_500.0)
    assert [(t.action, t.due_at) for t in due] == [(TimerAction.REMIND, 1_100.0)]
