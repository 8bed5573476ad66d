"""The `SessionStore` contract for issue 16: stopping a session (parked turns too), expiry timers
committed with their requests, answers with notes and events, and the queries across sessions
behind who-may-answer-what and a person's recent turns.

Run against `memory`, `sqlite` and `postgres`; every refusal is checked to have changed nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent import (
    ConfirmationResolved,
    InboundEvent,
    InputRequest,
    InputRequested,
    InputResolved,
    ResumeConflictError,
    SessionStore,
    Speaker,
    StepConflictError,
    TurnEvent,
    TurnInput,
    TurnStarted,
    TurnStatus,
    UserAnswerer,
    UserMessage,
)
from agent._turn_input import ConfirmationAnswer
from agent.seams import (
    ApprovalTimer,
    ConfirmationRecord,
    ConfirmationStatus,
    JsonValue,
    Lease,
    SessionStatus,
    StepCommit,
    TimerKind,
)

Reopen = Callable[[], Awaitable[SessionStore]]

S = "slack:T1:C1:500.0"
OTHER = "slack:T1:C2:600.0"
TTL = 30.0
NOW = 1_000.0


def _timer(session: str, turn_id: str, request_id: str, due_at: float, **kw: Any) -> ApprovalTimer:
    return ApprovalTimer(
        session=session,
        kind=kw.pop("kind", TimerKind.INPUT),
        turn_id=turn_id,
        request_id=request_id,
        due_at=due_at,
        expires_after=due_at - NOW,
        created_at=NOW,
    )


async def _running(store: SessionStore, turn_id: str, session: str = S) -> Lease:
    """`turn_id` queued and opened (running) under a fresh lease on `session`."""
    await store.enqueue_turn(session, turn_id, TurnInput(text=turn_id))
    lease = await store.acquire_lease(session, "w1", TTL, NOW)
    assert lease is not None
    index = len(await store.load_transcript(session))
    await store.commit(
        lease,
        StepCommit(
            turn_id=turn_id,
            messages=[(index, UserMessage(turn_id=turn_id, text=turn_id))],
            events=[TurnStarted(session=session, turn_id=turn_id, text=turn_id)],
            turn_status=TurnStatus.RUNNING,
            session_status=SessionStatus.RUNNING,
        ),
        TTL,
        NOW,
    )
    return lease


async def _parked(
    store: SessionStore, turn_id: str = "t1", session: str = S, due_at: float | None = 2_000.0
) -> dict[str, Any]:
    """`turn_id` parked on request `approve`, with an expiry timer unless `due_at` is None; the
    lease released, as a worker leaves a parked session."""
    lease = await _running(store, turn_id, session)
    request = {
        "id": "approve",
        "prompt": "Ship it?",
        "schema": None,
        "answerers": {"user": "U1"},
        "turn_id": turn_id,
        "call_id": "c1",
        "tool": "ship",
        "digest": "d1",
    }
    pending = {"turn_id": turn_id, "request": request, "call_id": "c1", "parked_at": NOW}
    timers = [] if due_at is None else [_timer(session, turn_id, "approve", due_at)]
    await store.commit(
        lease,
        StepCommit(
            turn_id=turn_id,
            step_id=f"park:{turn_id}:approve",
            step_value=pending,
            events=[
                InputRequested(
                    session=session, turn_id=turn_id, request=InputRequest.model_validate(request)
                )
            ],
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending=pending,
            timers=timers,
        ),
        TTL,
        NOW,
    )
    await store.release_lease(lease)
    return pending


def _resolved(outcome: str, turn_id: str = "t1", session: str = S) -> InputResolved:
    return InputResolved(
        session=session,
        turn_id=turn_id,
        input_id="approve",
        outcome=outcome,  # type: ignore[arg-type]
        by="U1" if outcome != "expired" else None,
    )


async def _seqs(store: SessionStore, session: str = S) -> list[tuple[int, str]]:
    return [(event.seq, event.type) for event in await store.read_events(session)]


# -- stop ---------------------------------------------------------------------------------------


async def test_stop_asks_every_unfinished_turn_to_stop_and_says_who(store: SessionStore) -> None:
    await _running(store, "t1")
    await store.enqueue_turn(S, "t2", TurnInput(text="two"))
    await store.enqueue_turn(S, "t3", TurnInput(text="three"))
    await store.request_cancel(S, "t3", "replaced")
    asked: list[JsonValue] = []

    stopped, events = await store.stop_session(
        S, reason="stopped", by="U7", now=NOW, ended_park=lambda p: asked.append(p) or []
    )

    assert [(t.turn_id, t.cancel_reason, t.cancelled_by) for t in stopped] == [
        ("t1", "stopped", "U7"),
        ("t2", "stopped", "U7"),
    ]
    assert (events, asked) == ([], []), "no park: nothing ended, nothing logged"
    t3 = await store.get_turn(S, "t3")
    assert t3 is not None
    assert (t3.cancel_reason, t3.cancelled_by) == ("replaced", None), "the first reason stands"
    again, _ = await store.stop_session(S, reason="again", by="U8", now=NOW)
    assert again == [], "a second stop asks nothing new"
    assert (await store.get_turn(S, "t1")).cancelled_by == "U7"  # type: ignore[union-attr]


async def test_stop_never_touches_a_queued_reset(store: SessionStore) -> None:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    await store.enqueue_reset(S, "reset:1")  # asks t1 to cancel with `reset`

    stopped, _ = await store.stop_session(S, reason="stopped", by="U7", now=NOW)

    assert stopped == []
    reset = await store.get_turn(S, "reset:1")
    assert reset is not None
    assert (reset.status, reset.cancel_reason) == (TurnStatus.QUEUED, None)


async def test_stop_ends_a_park_in_one_transaction(store: SessionStore) -> None:
    pending = await _parked(store)
    before = await _seqs(store)
    seen: list[JsonValue] = []

    def ended(checkpoint: JsonValue) -> list[TurnEvent]:
        seen.append(checkpoint)
        return [_resolved("cancelled")]

    stopped, events = await store.stop_session(
        S, reason="stopped", by="U7", now=NOW, ended_park=ended
    )

    assert seen == [pending]
    [turn] = stopped
    assert (turn.turn_id, turn.status, turn.cancel_reason, turn.cancelled_by) == (
        "t1",
        TurnStatus.QUEUED,
        "stopped",
        "U7",
    )
    session = await store.get_session(S)
    assert session is not None
    assert (session.status, session.pending) == (SessionStatus.RUNNING, None)
    assert [(e.seq, e.type) for e in events] == [(before[-1][0] + 1, "input.resolved")]
    assert await _seqs(store) == [*before, (before[-1][0] + 1, "input.resolved")]
    assert await store.due_timers(10_000.0) == [], "the park's timer went with it"
    assert await store.recoverable_sessions(NOW) == [S], "a worker picks the cancel up"
    with pytest.raises(ResumeConflictError):
        await store.resume_turn(
            S, "t1", expected_pending=pending, answer_step="input:t1:approve", answer=True
        )


async def test_stop_of_an_unknown_session_stops_nothing(store: SessionStore) -> None:
    assert await store.stop_session("nope", reason="stopped", by=None, now=NOW) == ([], [])
    assert await store.get_session("nope") is None


# -- answers with notes, events and timers --------------------------------------------------


async def test_resume_stores_its_notes_logs_its_events_and_drops_the_timer(
    store: SessionStore,
) -> None:
    pending = await _parked(store)
    before = await _seqs(store)
    note = {"outcome": "answered", "by": "U1", "reason": "looks right"}

    events = await store.resume_turn(
        S,
        "t1",
        expected_pending=pending,
        answer_step="input:t1:approve",
        answer=True,
        notes={"answer:t1:approve": note},
        events=[_resolved("answered")],
    )

    steps = await store.load_steps(S, "t1")
    assert (steps["input:t1:approve"], steps["answer:t1:approve"]) == (True, note)
    assert [(e.seq, e.type) for e in events] == [(before[-1][0] + 1, "input.resolved")]
    assert (await store.read_events(S))[-1] == events[0]
    assert await store.due_timers(10_000.0) == []


async def test_a_refused_resume_logs_nothing_and_keeps_the_timer(store: SessionStore) -> None:
    pending = await _parked(store)
    before = (await _seqs(store), await store.due_timers(10_000.0), await store.load_steps(S, "t1"))

    with pytest.raises(ResumeConflictError):
        await store.resume_turn(
            S,
            "t1",
            expected_pending={**pending, "call_id": "other"},
            answer_step="input:t1:approve",
            answer=True,
            notes={"answer:t1:approve": {"outcome": "expired"}},
            events=[_resolved("expired")],
        )

    after = (await _seqs(store), await store.due_timers(10_000.0), await store.load_steps(S, "t1"))
    assert after == before


async def test_of_an_expiry_and_answers_racing_exactly_one_applies(
    store: SessionStore, reopen: Reopen
) -> None:
    pending = await _parked(store)
    stores = [store, await reopen()] * 3

    async def answer(i: int, target: SessionStore) -> str:
        outcome = "expired" if i == 0 else "answered"
        try:
            await target.resume_turn(
                S,
                "t1",
                expected_pending=pending,
                answer_step="input:t1:approve",
                answer=i,
                notes={"answer:t1:approve": {"outcome": outcome}},
                events=[_resolved(outcome)],
            )
        except ResumeConflictError:
            return "refused"
        return "won"

    outcomes = await asyncio.gather(*(answer(i, s) for i, s in enumerate(stores)))

    assert sorted(outcomes) == ["refused"] * 5 + ["won"]
    assert [e.type for e in await store.read_events(S)].count("input.resolved") == 1


async def test_a_commit_stores_its_timers_and_due_timers_reads_them_earliest_first(
    store: SessionStore,
) -> None:
    await _parked(store, "t1", S, due_at=3_000.0)
    await _parked(store, "t2", OTHER, due_at=2_000.0)

    assert await store.due_timers(1_999.0) == []
    [first] = await store.due_timers(2_000.0)
    assert first == _timer(OTHER, "t2", "approve", 2_000.0)
    assert [t.session for t in await store.due_timers(5_000.0)] == [OTHER, S]
    assert len(await store.due_timers(5_000.0, limit=1)) == 1

    await store.drop_timer(first)
    assert [t.session for t in await store.due_timers(5_000.0)] == [S]
    await store.drop_timer(first)  # gone already: nothing to do


async def test_a_commit_with_a_timer_that_exists_commits_nothing(store: SessionStore) -> None:
    lease = await _running(store, "t1")
    timer = _timer(S, "t1", "approve", 2_000.0)
    await store.commit(lease, StepCommit(turn_id="t1", timers=[timer]), TTL, NOW)
    before = (await _seqs(store), await store.load_steps(S, "t1"))

    with pytest.raises(StepConflictError):
        await store.commit(
            lease,
            StepCommit(
                turn_id="t1",
                step_id="tool:1:c1",
                step_value={"ok": True},
                events=[TurnStarted(session=S, turn_id="t1", text="again")],
                timers=[timer],
            ),
            TTL,
            NOW,
        )

    assert (await _seqs(store), await store.load_steps(S, "t1")) == before
    assert await store.due_timers(5_000.0) == [timer]


async def test_a_reset_drops_the_sessions_timers(store: SessionStore) -> None:
    await _parked(store)
    await _parked(store, "t2", OTHER)
    await store.enqueue_reset(S, "reset:1")
    lease = await store.acquire_lease(S, "w1", TTL, NOW)
    assert lease is not None

    await store.apply_reset(lease, "reset:1", [], TTL, NOW)

    assert [t.session for t in await store.due_timers(10_000.0)] == [OTHER]


# -- confirmations ------------------------------------------------------------------------------


def _proposal(
    session: str, turn_id: str, *, expires_at: float | None = 2_000.0
) -> ConfirmationRecord:
    return ConfirmationRecord(
        session=session,
        confirmation_id=f"{turn_id}:c1",
        turn_id=turn_id,
        call_id="c1",
        tool="refund",
        arguments={"order": "A-1"},
        prompt="Refund A-1?",
        answerers=UserAnswerer(user="U1"),
        created_at=NOW,
        expires_at=expires_at,
    )


async def _proposed(store: SessionStore, session: str, turn_id: str) -> ConfirmationRecord:
    """`turn_id` proposed a write with an expiry timer, then finished."""
    lease = await _running(store, turn_id, session)
    proposal = _proposal(session, turn_id)
    timer = _timer(session, turn_id, proposal.confirmation_id, 2_000.0, kind=TimerKind.CONFIRMATION)
    await store.commit(
        lease,
        StepCommit(turn_id=turn_id, confirmations=[proposal], timers=[timer]),
        TTL,
        NOW,
    )
    done = StepCommit(
        turn_id=turn_id, turn_status=TurnStatus.COMPLETED, session_status=SessionStatus.IDLE
    )
    await store.commit(lease, done, TTL, NOW)
    await store.release_lease(lease)
    return proposal


async def _resolve(
    store: SessionStore, proposal: ConfirmationRecord, status: ConfirmationStatus, **kw: Any
) -> None:
    follow_up = TurnInput(
        text="resolved",
        confirmation=ConfirmationAnswer(
            confirmation_id=proposal.confirmation_id,
            accepted=status == ConfirmationStatus.ACCEPTED,
            tool=proposal.tool,
            call_id=proposal.call_id,
            arguments=proposal.arguments,
        ),
    )
    resolved = ConfirmationResolved(
        session=proposal.session,
        turn_id=f"confirm:{proposal.confirmation_id}",
        confirmation_id=proposal.confirmation_id,
        accepted=status == ConfirmationStatus.ACCEPTED,
        outcome=status.value,  # type: ignore[arg-type]
    )
    await store.resolve_confirmation(
        proposal.session,
        proposal.confirmation_id,
        accepted=status == ConfirmationStatus.ACCEPTED,
        by=kw.get("by"),
        follow_up_turn=f"confirm:{proposal.confirmation_id}",
        follow_up=follow_up,
        events=[resolved],
        now=kw.get("at", NOW + 1),
        status=status,
        reason=kw.get("reason"),
        approved_arguments=kw.get("approved_arguments"),
    )


async def test_a_confirmation_is_resolved_with_its_status_and_reason_and_drops_its_timer(
    store: SessionStore,
) -> None:
    denied = await _proposed(store, S, "t1")
    expired = await _proposed(store, OTHER, "t2")
    assert len(await store.due_timers(5_000.0)) == 2

    await _resolve(store, denied, ConfirmationStatus.DENIED, by="U1", reason="wrong order")
    await _resolve(store, expired, ConfirmationStatus.EXPIRED)

    first = await store.get_confirmation(S, denied.confirmation_id)
    second = await store.get_confirmation(OTHER, expired.confirmation_id)
    assert first is not None
    assert second is not None
    assert (first.status, first.by, first.reason) == (
        ConfirmationStatus.DENIED,
        "U1",
        "wrong order",
    )
    assert (second.status, second.by, second.reason) == (ConfirmationStatus.EXPIRED, None, None)
    assert first.expires_at == 2_000.0
    assert await store.due_timers(5_000.0) == []
    with pytest.raises(ResumeConflictError):
        await _resolve(store, expired, ConfirmationStatus.ACCEPTED, by="U1")
    assert (await store.get_confirmation(OTHER, expired.confirmation_id)) == second


async def test_pending_confirmations_are_listed_across_sessions_oldest_first(
    store: SessionStore,
) -> None:
    first = await _proposed(store, OTHER, "t1")
    second = await _proposed(store, S, "t2")
    third = await _proposed(store, S, "t3")
    await _resolve(store, second, ConfirmationStatus.ACCEPTED, by="U1")

    listed = await store.pending_confirmations()

    assert [(c.session, c.confirmation_id) for c in listed] == [
        (first.session, first.confirmation_id),
        (third.session, third.confirmation_id),
    ]
    assert listed[0] == await store.get_confirmation(OTHER, first.confirmation_id)


async def test_answered_confirmations_are_the_audit_newest_first_with_what_ran(
    store: SessionStore,
) -> None:
    first = await _proposed(store, OTHER, "t1")
    second = await _proposed(store, S, "t2")
    third = await _proposed(store, S, "t3")
    waiting = await _proposed(store, S, "t4")
    edited = {**second.arguments, "edited": True}
    await _resolve(store, first, ConfirmationStatus.DENIED, by="U1", at=NOW + 1)
    await _resolve(
        store, second, ConfirmationStatus.ACCEPTED, by="U2", at=NOW + 3, approved_arguments=edited
    )
    await _resolve(store, third, ConfirmationStatus.EXPIRED, at=NOW + 2)

    listed = await store.answered_confirmations()

    assert [c.confirmation_id for c in listed] == [
        second.confirmation_id,
        third.confirmation_id,
        first.confirmation_id,
    ]
    assert waiting.confirmation_id not in [c.confirmation_id for c in listed]
    assert (listed[0].arguments, listed[0].approved_arguments) == (second.arguments, edited)
    assert (listed[0].by, listed[0].resolved_at) == ("U2", NOW + 3)
    assert listed[1].approved_arguments is None
    recent = await store.answered_confirmations(since=NOW + 2)
    assert [c.confirmation_id for c in recent] == [second.confirmation_id, third.confirmation_id]
    assert [c.confirmation_id for c in await store.answered_confirmations(limit=1)] == [
        second.confirmation_id
    ]


# -- across sessions ----------------------------------------------------------------------------


async def test_list_parked_names_every_suspended_session_with_its_checkpoint(
    store: SessionStore,
) -> None:
    pending = await _parked(store, "t1", OTHER)
    await _parked(store, "t2", S)
    await _running(store, "t3", "slack:T1:C3:1.0")
    await store.stop_session(S, reason="stopped", by=None, now=NOW)

    parked = await store.list_parked()

    assert [(record.key, record.status, record.pending) for record in parked] == [
        (OTHER, SessionStatus.SUSPENDED, pending)
    ]


def _said(text: str, user: str, *, team: str = "T1", attested: bool = True) -> TurnInput:
    inbound = InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id=user, attested=attested),
        context={"team": team, "channel": "C1"},
    )
    return TurnInput.of(inbound)


async def test_recent_turns_are_a_speakers_own_newest_first_across_sessions(
    store: SessionStore,
) -> None:
    await store.enqueue_turn(S, "a", _said("first", "U1"))
    await store.enqueue_turn(OTHER, "b", _said("second", "U1"))
    await store.enqueue_turn(S, "c", _said("someone else", "U2"))
    await store.enqueue_turn(S, "d", _said("same id, other workspace", "U1", team="T9"))
    await store.enqueue_turn(S, "e", _said("unattested", "U1", attested=False))
    await store.enqueue_turn(S, "f", TurnInput(text="host code"))
    await store.enqueue_turn(OTHER, "g", _said("third", "U1"))

    recent = await store.recent_turns("T1:U1", limit=10)

    assert [(t.session, t.turn_id, t.input.text) for t in recent] == [
        (OTHER, "g", "third"),
        (OTHER, "b", "second"),
        (S, "a", "first"),
    ]
    assert all(t.created_at > 0 for t in recent)
    assert [t.turn_id for t in await store.recent_turns("T1:U1", limit=2)] == ["g", "b"]
    assert await store.recent_turns("T1:U3", limit=10) == []
