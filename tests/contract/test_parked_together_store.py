"""The `SessionStore` contract for issue 31: a park on several requests (the calls of one batch
that each asked). An answer to one while others wait (`still_pending`) keeps the turn and the
session parked, stores the answer, logs its events and drops that request's timer alone; the
last answer queues the turn. Answers to different requests race on `pending`: each loser is
refused whole. Run against `memory`, `sqlite` and `postgres`."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent import (
    InputRequest,
    InputResolved,
    ResumeConflictError,
    SessionStore,
    TurnInput,
    TurnStarted,
    TurnStatus,
    UserMessage,
)
from agent._hitl_requests import parked_requests, with_requests, without_request
from agent.seams import ApprovalTimer, JsonValue, SessionStatus, StepCommit, TimerKind

Reopen = Callable[[], Awaitable[SessionStore]]

S = "slack:T1:C1:700.0"
TTL = 30.0
NOW = 1_000.0
IDS = ("approve@c1", "approve@c2", "approve@c3")


def _request(n: int) -> InputRequest:
    return InputRequest.model_validate(
        {
            "id": IDS[n],
            "prompt": f"Refund order {n}?",
            "answerers": {"user": f"U{n}"},
            "turn_id": "t1",
            "call_id": f"c{n + 1}",
            "tool": "refund",
            "digest": f"d{n}",
        }
    )


async def _parked_on_three(store: SessionStore) -> JsonValue:
    """Turn `t1` parked on three requests, each with its own expiry timer."""
    await store.enqueue_turn(S, "t1", TurnInput(text="refund them"))
    lease = await store.acquire_lease(S, "w1", TTL, NOW)
    assert lease is not None
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            messages=[(0, UserMessage(turn_id="t1", text="refund them"))],
            events=[TurnStarted(session=S, turn_id="t1", text="refund them")],
            turn_status=TurnStatus.RUNNING,
            session_status=SessionStatus.RUNNING,
        ),
        TTL,
        NOW,
    )
    requests = [_request(n) for n in range(3)]
    pending = with_requests({"turn_id": "t1", "parked_at": NOW}, requests)
    timers = [
        ApprovalTimer(
            session=S,
            kind=TimerKind.INPUT,
            turn_id="t1",
            request_id=request.id,
            due_at=2_000.0 + n,
            expires_after=1_000.0 + n,
            created_at=NOW,
        )
        for n, request in enumerate(requests)
    ]
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            step_id=f"park:t1:{IDS[0]}",
            step_value=pending,
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


async def _answer(store: SessionStore, pending: JsonValue, n: int, **kw: Any) -> None:
    request = _request(n)
    await store.resume_turn(
        S,
        "t1",
        expected_pending=pending,
        answer_step=f"input:t1:{request.id}",
        answer=True,
        events=[
            InputResolved(
                session=S, turn_id="t1", input_id=request.id, outcome="answered", by=f"U{n}"
            )
        ],
        still_pending=without_request(pending, request),
        request_id=request.id,
        **kw,
    )


async def test_an_answer_while_others_wait_keeps_the_park_and_drops_only_its_timer(
    store: SessionStore,
) -> None:
    pending = await _parked_on_three(store)

    await _answer(store, pending, 1)

    record = await store.get_session(S)
    turn = await store.get_turn(S, "t1")
    assert record is not None
    assert turn is not None
    assert (record.status, turn.status) == (SessionStatus.SUSPENDED, TurnStatus.SUSPENDED)
    assert [r.id for r in parked_requests(record.pending)] == [IDS[0], IDS[2]]
    assert [t.request_id for t in await store.due_timers(10_000.0)] == [IDS[0], IDS[2]]
    assert (await store.load_steps(S, "t1"))[f"input:t1:{IDS[1]}"] is True
    assert [e.type for e in await store.read_events(S)][-1] == "input.resolved"
    assert [r.key for r in await store.list_parked()] == [S]


async def test_the_last_answer_queues_the_turn_and_ends_the_park(store: SessionStore) -> None:
    pending = await _parked_on_three(store)
    for n in (2, 0, 1):
        record = await store.get_session(S)
        assert record is not None
        await _answer(store, record.pending, n)

    record = await store.get_session(S)
    turn = await store.get_turn(S, "t1")
    assert record is not None
    assert turn is not None
    assert (record.status, record.pending) == (SessionStatus.RUNNING, None)
    assert turn.status == TurnStatus.QUEUED
    assert await store.due_timers(10_000.0) == []
    steps = await store.load_steps(S, "t1")
    assert all(steps[f"input:t1:{i}"] is True for i in IDS)
    assert pending is not None


async def test_an_answer_against_a_park_a_sibling_changed_is_refused_whole(
    store: SessionStore,
) -> None:
    pending = await _parked_on_three(store)
    await _answer(store, pending, 0)
    before = (
        [(e.seq, e.type) for e in await store.read_events(S)],
        await store.due_timers(10_000.0),
        await store.load_steps(S, "t1"),
    )

    with pytest.raises(ResumeConflictError):
        await _answer(store, pending, 1)  # read before the first answer landed

    after = (
        [(e.seq, e.type) for e in await store.read_events(S)],
        await store.due_timers(10_000.0),
        await store.load_steps(S, "t1"),
    )
    assert after == before


async def test_answers_to_different_requests_racing_apply_one_at_a_time(
    store: SessionStore, reopen: Reopen
) -> None:
    """Each read the same park; exactly one applies per round, the rest are refused and, read
    again, apply in later rounds: no answer is lost or applied twice."""
    await _parked_on_three(store)
    stores = [store, await reopen(), await reopen()]
    left = {0, 1, 2}
    rounds = 0
    while left:
        rounds += 1
        record = await store.get_session(S)
        assert record is not None

        async def one(n: int, target: SessionStore, seen: JsonValue = record.pending) -> int:
            try:
                await _answer(target, seen, n)
            except ResumeConflictError:
                return -1
            return n

        won = [
            n for n in await asyncio.gather(*(one(n, stores[n]) for n in sorted(left))) if n >= 0
        ]
        assert len(won) == 1, won
        left -= set(won)
    assert rounds == 3
    turn = await store.get_turn(S, "t1")
    assert turn is not None
    assert turn.status == TurnStatus.QUEUED
    assert [e.type for e in await store.read_events(S)].count("input.resolved") == 3
