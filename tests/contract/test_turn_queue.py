"""The `SessionStore` contract for the turn queue beyond plain enqueueing: replacing, cancelling,
resetting (and reading the archive), resuming a parked turn, and `open_turns`.

Run against `memory`, `sqlite` and `postgres`; every refusal is checked to have changed nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent import (
    ActionCompleted,
    InputRequest,
    InputRequested,
    LeaseLostError,
    ResumeConflictError,
    SessionStore,
    StepConflictError,
    TurnInput,
    TurnStarted,
    TurnStatus,
    UserMessage,
)
from agent.seams import FactRecord, Lease, SessionStatus, StepCommit, TurnKind

Reopen = Callable[[], Awaitable[SessionStore]]

S = "slack:T1:C1:200.0"
TTL = 30.0
NOW = 1_000.0


async def _lease(store: SessionStore, owner: str = "w1") -> Lease:
    lease = await store.acquire_lease(S, owner, TTL, NOW)
    assert lease is not None
    return lease


async def _start(store: SessionStore, lease: Lease, turn_id: str, idx: int) -> None:
    """The opening commit of a turn: it is running, with a message, a step and an event."""
    await store.commit(
        lease,
        StepCommit(
            turn_id=turn_id,
            step_id=f"input:{turn_id}:open",
            step_value={"text": turn_id},
            messages=[(idx, UserMessage(turn_id=turn_id, text=turn_id))],
            events=[TurnStarted(session=S, turn_id=turn_id, text=turn_id)],
            turn_status=TurnStatus.RUNNING,
            session_status=SessionStatus.RUNNING,
            turn_fingerprint=f"agent@{turn_id}",
        ),
        TTL,
        NOW,
    )


async def _park(store: SessionStore, lease: Lease, turn_id: str) -> dict[str, Any]:
    """Park `turn_id`; the pending record's keys are deliberately not in sorted order."""
    request = {
        "id": "approve",
        "prompt": "Ship it?",
        "schema": None,
        "answerers": None,
        "turn_id": turn_id,
        "call_id": "c1",
        "tool": "ship",
        "digest": "d1",
    }
    pending = {"turn_id": turn_id, "request": request, "call_id": "c1", "answers": [2, 1]}
    await store.commit(
        lease,
        StepCommit(
            turn_id=turn_id,
            step_id=f"park:{turn_id}:approve",
            step_value=pending,
            events=[
                InputRequested(
                    session=S, turn_id=turn_id, request=InputRequest.model_validate(request)
                )
            ],
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending=pending,
        ),
        TTL,
        NOW,
    )
    return pending


async def _reasons(store: SessionStore) -> dict[str, str | None]:
    return {turn.turn_id: turn.cancel_reason for turn in await store.list_turns(S)}


# -- replace and cancel -------------------------------------------------------------------------


async def test_replace_cancels_queued_and_running_turns_of_the_session(
    store: SessionStore,
) -> None:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    await _start(store, await _lease(store), "t1", 0)
    await store.enqueue_turn(S, "t2", TurnInput(text="two"))
    await store.enqueue_turn("elsewhere", "t1", TurnInput(text="other session"))

    record, created = await store.enqueue_turn(
        S, "t3", TurnInput(text="three"), cancel_unfinished="replaced"
    )

    assert created
    assert (record.status, record.cancel_reason, record.kind) == (
        TurnStatus.QUEUED,
        None,
        TurnKind.TURN,
    )
    assert await _reasons(store) == {"t1": "replaced", "t2": "replaced", "t3": None}
    other = await store.get_turn("elsewhere", "t1")
    assert other is not None
    assert other.cancel_reason is None


async def test_replace_with_an_existing_turn_id_cancels_nothing(store: SessionStore) -> None:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    await store.enqueue_turn(S, "t2", TurnInput(text="two"))

    again, created = await store.enqueue_turn(
        S, "t2", TurnInput(text="retry"), cancel_unfinished="replaced"
    )

    assert not created
    assert again.input.text == "two"
    assert await _reasons(store) == {"t1": None, "t2": None}


async def test_replace_never_touches_a_suspended_turn(store: SessionStore) -> None:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    lease = await _lease(store)
    await _park(store, lease, "t1")
    # The session is let go of the park (as an operator might), the turn row stays suspended.
    unpark = StepCommit(turn_id="t1", session_status=SessionStatus.IDLE, set_pending=True)
    await store.commit(lease, unpark, TTL, NOW)

    await store.enqueue_turn(S, "t2", TurnInput(text="two"), cancel_unfinished="replaced")

    parked = await store.get_turn(S, "t1")
    assert parked is not None
    assert (parked.status, parked.cancel_reason) == (TurnStatus.SUSPENDED, None)


async def test_request_cancel_only_reaches_queued_or_running_turns(store: SessionStore) -> None:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    await store.enqueue_turn(S, "t2", TurnInput(text="two"))

    first = await store.request_cancel(S, "t1", "user asked")
    again = await store.request_cancel(S, "t1", "second thoughts")

    assert first is not None
    assert (first.turn_id, first.status, first.cancel_reason) == (
        "t1",
        TurnStatus.QUEUED,
        "user asked",
    )
    assert again == first, "the first reason stands"
    assert await store.request_cancel(S, "nope", "x") is None
    assert await store.request_cancel("nope", "t1", "x") is None

    lease = await _lease(store)
    done = StepCommit(turn_id="t2", turn_status=TurnStatus.COMPLETED, turn_result="ok")
    await store.commit(lease, done, TTL, NOW)
    assert await store.request_cancel(S, "t2", "too late") is None
    await store.enqueue_turn(S, "t3", TurnInput(text="three"))
    await _park(store, lease, "t3")
    assert await store.request_cancel(S, "t3", "parked") is None, "a park is left for reset"
    assert await _reasons(store) == {"t1": "user asked", "t2": None, "t3": None}


# -- reset --------------------------------------------------------------------------------------


async def _history(store: SessionStore) -> Lease:
    """t1 finished with a message, steps, events and a fact; t2 parked. Event seqs 1..4."""
    await store.enqueue_turn(S, "t1", TurnInput(text="t1"))
    lease = await _lease(store)
    await _start(store, lease, "t1", 0)
    fact = FactRecord(
        session=S, key="order", version=1, value={"n": 1}, turn_id="t1", step_id="tool", call_id="c"
    )
    finish = StepCommit(
        turn_id="t1",
        step_id="tool:0:c",
        step_value={"ok": True},
        facts=[fact],
        events=[ActionCompleted(session=S, turn_id="t1", call_id="c", name="order")],
        turn_status=TurnStatus.COMPLETED,
        session_status=SessionStatus.IDLE,
    )
    await store.commit(lease, finish, TTL, NOW)
    await store.enqueue_turn(S, "t2", TurnInput(text="t2"))
    await _start(store, lease, "t2", 1)
    await _park(store, lease, "t2")
    return lease


async def test_reset_archives_the_generation_and_starts_the_next(store: SessionStore) -> None:
    lease = await _history(store)
    before = await store.read_events(S)
    assert [e.seq for e in before] == [1, 2, 3, 4]

    reset = await store.enqueue_reset(S, "reset:1")  # allowed while parked
    assert (reset.kind, reset.status, reset.input.text) == (TurnKind.RESET, TurnStatus.QUEUED, "")
    assert await store.enqueue_reset(S, "reset:1") == reset, "idempotent by id"
    queued = await store.next_turn(S)
    assert queued is not None
    assert queued.turn_id == "reset:1"

    marker = TurnStarted(session=S, turn_id="reset:1", text="reset")
    archived, events = await store.apply_reset(lease, "reset:1", [marker], TTL, NOW + 5)

    assert archived == 0
    assert [(e.seq, e.turn_id) for e in events] == [(5, "reset:1")], "seqs never restart"
    assert await store.read_events(S) == events
    assert await store.load_transcript(S) == []
    assert await store.load_steps(S, "t1") == {}
    assert await store.get_fact(S, "order") is None
    session = await store.get_session(S)
    assert session is not None
    assert (session.status, session.pending, session.generation) == (SessionStatus.NEW, None, 1)
    assert session.lease_expires_at == NOW + 5 + TTL
    parked = await store.get_turn(S, "t2")
    assert parked is not None
    assert (parked.status, parked.cancel_reason) == (TurnStatus.CANCELLED, "reset")
    done = await store.get_turn(S, "reset:1")
    assert done is not None
    assert done.status is TurnStatus.COMPLETED
    assert done.result == {"status": "completed", "archived_generation": 0, "generation": 1}
    assert await store.next_turn(S) is None
    assert await store.list_turns(S) == []

    old = await store.read_archive(S, 0)
    assert (old.session, old.generation) == (S, 0)
    assert old.messages == [
        UserMessage(turn_id="t1", text="t1"),
        UserMessage(turn_id="t2", text="t2"),
    ]
    assert list(old.steps) == ["input:t1:open", "tool:0:c", "input:t2:open", "park:t2:approve"]
    assert old.events == before
    assert [(f.key, f.version, f.value) for f in old.facts] == [("order", 1, {"n": 1})]
    empty = await store.read_archive(S, 1)
    assert (empty.messages, empty.steps, empty.events, empty.facts) == ([], {}, [], [])


async def test_after_a_reset_the_session_runs_on_and_old_turn_ids_are_known(
    store: SessionStore,
) -> None:
    lease = await _history(store)
    await store.enqueue_reset(S, "reset:1")
    await store.apply_reset(lease, "reset:1", [], TTL, NOW)

    retried, created = await store.enqueue_turn(S, "t1", TurnInput(text="slack retry"))
    assert (created, retried.status) == (False, TurnStatus.COMPLETED)
    await store.enqueue_turn(S, "t3", TurnInput(text="t3"))
    await _start(store, lease, "t3", 0)  # the transcript starts again at index 0
    assert [e.seq for e in await store.read_events(S)] == [5]
    assert [t.turn_id for t in await store.list_turns(S)] == ["t3"]
    await store.enqueue_reset(S, "reset:2")
    archived, _ = await store.apply_reset(lease, "reset:2", [], TTL, NOW)
    assert archived == 1
    assert (await store.read_archive(S, 1)).messages == [UserMessage(turn_id="t3", text="t3")]
    assert len((await store.read_archive(S, 0)).messages) == 2


async def test_reset_cancels_turns_before_it_and_keeps_those_behind_it(
    store: SessionStore,
) -> None:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    await store.enqueue_reset(S, "reset:1")
    await store.enqueue_turn(S, "t2", TurnInput(text="after"))
    assert await _reasons(store) == {"t1": "reset", "reset:1": None, "t2": None}

    async def next_id() -> str | None:
        queued = await store.next_turn(S)
        return None if queued is None else queued.turn_id

    assert await next_id() == "t1", "a reset waits its turn on the chain"
    lease = await _lease(store)
    cancelled = StepCommit(turn_id="t1", turn_status=TurnStatus.CANCELLED)
    await store.commit(lease, cancelled, TTL, NOW)
    assert await next_id() == "reset:1"
    await store.apply_reset(lease, "reset:1", [], TTL, NOW)

    assert [t.turn_id for t in await store.list_turns(S)] == ["t2"]
    queued = await store.next_turn(S)
    assert queued is not None
    assert (queued.turn_id, queued.cancel_reason) == ("t2", None)


async def test_reset_is_fenced_and_applies_once(store: SessionStore) -> None:
    zombie = await _history(store)
    await store.enqueue_reset(S, "reset:1")
    fresh = await store.acquire_lease(S, "w2", TTL, NOW + TTL + 1)
    assert fresh is not None

    with pytest.raises(LeaseLostError):
        await store.apply_reset(zombie, "reset:1", [], TTL, NOW + TTL + 2)
    assert len(await store.load_transcript(S)) == 2
    session = await store.get_session(S)
    assert session is not None
    assert (session.status, session.generation) == (SessionStatus.SUSPENDED, 0)

    await store.apply_reset(fresh, "reset:1", [], TTL, NOW + TTL + 2)
    with pytest.raises(StepConflictError):
        await store.apply_reset(fresh, "reset:1", [], TTL, NOW + TTL + 2)
    with pytest.raises(StepConflictError):
        await store.apply_reset(fresh, "t1", [], TTL, NOW + TTL + 2)  # not a reset
    session = await store.get_session(S)
    assert session is not None
    assert session.generation == 1


# -- resume -------------------------------------------------------------------------------------


async def _parked(store: SessionStore) -> dict[str, Any]:
    await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    lease = await _lease(store)
    await _start(store, lease, "t1", 0)
    pending = await _park(store, lease, "t1")
    await store.release_lease(lease)
    return pending


async def test_resume_stores_the_answer_and_requeues_the_turn(store: SessionStore) -> None:
    pending = await _parked(store)
    session = await store.get_session(S)
    assert session is not None
    assert session.pending == pending

    reordered = {key: session.pending[key] for key in reversed(list(session.pending))}
    await store.resume_turn(
        S, "t1", expected_pending=reordered, answer_step="input:t1:approve", answer={"ok": 1}
    )

    turn = await store.get_turn(S, "t1")
    session = await store.get_session(S)
    assert turn is not None
    assert session is not None
    assert turn.status is TurnStatus.QUEUED
    assert (session.status, session.pending) == (SessionStatus.RUNNING, None)
    assert (await store.load_steps(S, "t1"))["input:t1:approve"] == {"ok": 1}
    assert await store.recoverable_sessions(NOW) == [S]


@pytest.mark.parametrize(
    "change",
    ["other request", "other turn", "answered step", "reset queued", "unknown session"],
)
async def test_resume_refusals_change_nothing(store: SessionStore, change: str) -> None:
    pending = await _parked(store)
    session, turn_id, step = S, "t1", "input:t1:approve"
    expected: dict[str, Any] = dict(pending)
    if change == "other request":
        expected["request"] = {"id": "approve", "prompt": "Ship something else?"}
    elif change == "other turn":
        turn_id = "t9"
    elif change == "answered step":
        step = "park:t1:approve"  # a step the turn already has
    elif change == "reset queued":
        await store.enqueue_reset(S, "reset:1")
    else:
        session = "nope"
    before = (await store.get_session(S), await store.load_steps(S, "t1"))

    with pytest.raises(ResumeConflictError):
        await store.resume_turn(
            session, turn_id, expected_pending=expected, answer_step=step, answer=1
        )

    assert (await store.get_session(S), await store.load_steps(S, "t1")) == before
    turn = await store.get_turn(S, "t1")
    assert turn is not None
    assert turn.status is TurnStatus.SUSPENDED
    assert await store.get_session("nope") is None


async def test_of_two_racing_resumes_exactly_one_wins(store: SessionStore, reopen: Reopen) -> None:
    pending = await _parked(store)
    stores = [store, await reopen()] * 3

    async def answer(i: int, target: SessionStore) -> str:
        try:
            await target.resume_turn(
                S, "t1", expected_pending=pending, answer_step="input:t1:approve", answer=i
            )
        except ResumeConflictError:
            return "refused"
        return "won"

    outcomes = await asyncio.gather(*(answer(i, s) for i, s in enumerate(stores)))

    assert sorted(outcomes) == ["refused"] * 5 + ["won"]
    winner = outcomes.index("won")
    assert (await store.load_steps(S, "t1"))["input:t1:approve"] == winner


# -- what is open, and what a turn started under ------------------------------------------------


async def test_open_turns_lists_queued_running_and_parked_turns_of_every_session(
    store: SessionStore,
) -> None:
    await _parked(store)  # t1 of S, suspended
    await store.enqueue_turn("b", "queued", TurnInput(text="q"))
    await store.enqueue_turn("c", "done", TurnInput(text="d"))
    lease = await store.acquire_lease("c", "w", TTL, NOW)
    assert lease is not None
    await store.commit(lease, StepCommit(turn_id="done", turn_status=TurnStatus.FAILED), TTL, NOW)
    await store.enqueue_turn("c", "running", TurnInput(text="r"))
    running = StepCommit(turn_id="running", turn_status=TurnStatus.RUNNING)
    await store.commit(lease, running, TTL, NOW)

    opened = [(t.session, t.turn_id, t.status) for t in await store.open_turns()]

    assert opened == [
        (S, "t1", TurnStatus.SUSPENDED),
        ("b", "queued", TurnStatus.QUEUED),
        ("c", "running", TurnStatus.RUNNING),
    ]


async def test_the_opening_commit_stores_the_agent_fingerprint(store: SessionStore) -> None:
    queued, _ = await store.enqueue_turn(S, "t1", TurnInput(text="one"))
    assert (queued.kind, queued.fingerprint) == (TurnKind.TURN, None)
    await _start(store, await _lease(store), "t1", 0)
    turn = await store.get_turn(S, "t1")
    assert turn is not None
    assert turn.fingerprint == "agent@t1"
    assert [t.fingerprint for t in await store.list_turns(S)] == ["agent@t1"]


# -- what operators read: open work with its leases, and failure streaks -----------------------


async def _end(store: SessionStore, session: str, turn_id: str, status: TurnStatus) -> None:
    lease = await store.acquire_lease(session, "w", TTL, NOW)
    assert lease is not None
    result = {"status": status.value, "error": f"{turn_id} broke"}
    await store.commit(
        lease, StepCommit(turn_id=turn_id, turn_status=status, turn_result=result), TTL, NOW
    )
    await store.release_lease(lease)


async def test_open_work_gives_each_session_with_open_turns_its_lease_and_turns(
    store: SessionStore,
) -> None:
    await _parked(store)  # t1 of S, suspended, lease released
    await store.enqueue_turn("b", "b1", TurnInput(text="one"))
    await store.enqueue_turn("b", "b2", TurnInput(text="two"))
    lease = await store.acquire_lease("b", "w-b", TTL, NOW)
    assert lease is not None
    await store.commit(lease, StepCommit(turn_id="b1", turn_status=TurnStatus.RUNNING), TTL, NOW)
    await store.enqueue_turn("c", "c1", TurnInput(text="done"))
    await _end(store, "c", "c1", TurnStatus.COMPLETED)

    work = await store.open_work()

    assert [(s.key, [(t.turn_id, t.status) for t in turns]) for s, turns in work] == [
        ("b", [("b1", TurnStatus.RUNNING), ("b2", TurnStatus.QUEUED)]),
        (S, [("t1", TurnStatus.SUSPENDED)]),
    ]
    held, parked = work[0][0], work[1][0]
    assert (held.lease_owner, held.lease_expires_at, held.lease_epoch) == ("w-b", NOW + TTL, 1)
    assert held.updated_at == NOW  # its last write: the fenced commit
    assert (parked.lease_owner, parked.status) == (None, SessionStatus.SUSPENDED)


async def test_a_session_row_says_when_a_park_ended(store: SessionStore) -> None:
    """A resumed turn is queued again: `updated_at` is when, which `bot turns --stuck` measures
    its wait from (its `created_at` is when it was first queued)."""
    await store.enqueue_turn("fresh", "f1", TurnInput(text="new"))
    [(fresh, _)] = [(s, t) for s, t in await store.open_work() if s.key == "fresh"]
    [queued] = await store.list_turns("fresh")
    assert fresh.updated_at == queued.created_at

    pending = await _parked(store)
    session = await store.get_session(S)
    assert session is not None
    assert session.updated_at == NOW  # the park's commit
    await store.resume_turn(S, "t1", expected_pending=pending, answer_step="a", answer=True)

    session = await store.get_session(S)
    assert session is not None
    assert session.updated_at > NOW  # the resume, on the store's clock (now)


async def test_failure_streaks_are_the_failed_turns_since_the_last_that_got_somewhere(
    store: SessionStore,
) -> None:
    for turn_id, status in [
        ("a1", TurnStatus.COMPLETED),
        ("a2", TurnStatus.FAILED),
        ("a3", TurnStatus.FAILED),
    ]:
        await store.enqueue_turn("a", turn_id, TurnInput(text=turn_id))
        await _end(store, "a", turn_id, status)
    for turn_id, status in [("b1", TurnStatus.FAILED), ("b2", TurnStatus.CANCELLED)]:
        await store.enqueue_turn("b", turn_id, TurnInput(text=turn_id))
        await _end(store, "b", turn_id, status)
    for turn_id in ["c1", "c2"]:
        await store.enqueue_turn("c", turn_id, TurnInput(text=turn_id))
        await _end(store, "c", turn_id, TurnStatus.FAILED)
    await store.enqueue_turn("c", "c3", TurnInput(text="queued"))  # neither ends nor extends it
    await store.enqueue_turn("d", "d1", TurnInput(text="d1"))
    await _end(store, "d", "d1", TurnStatus.FAILED)

    streaks = await store.failure_streaks(2)
    assert [[t.turn_id for t in streak] for streak in streaks] == [["a2", "a3"], ["c1", "c2"]]
    assert streaks[0][-1].result == {"status": "failed", "error": "a3 broke"}
    everyone = [[t.turn_id for t in s] for s in await store.failure_streaks(1)]
    assert everyone == [["a2", "a3"], ["c1", "c2"], ["d1"]]


async def test_failure_streaks_count_the_live_generation_only(store: SessionStore) -> None:
    for turn_id in ["x1", "x2"]:
        await store.enqueue_turn(S, turn_id, TurnInput(text=turn_id))
        await _end(store, S, turn_id, TurnStatus.FAILED)
    assert [len(s) for s in await store.failure_streaks(2)] == [2]

    await store.enqueue_reset(S, "r1")
    lease = await _lease(store)
    await store.apply_reset(lease, "r1", [], TTL, NOW)
    await store.release_lease(lease)

    assert await store.failure_streaks(1) == []
    await store.enqueue_turn(S, "x3", TurnInput(text="after"))
    await _end(store, S, "x3", TurnStatus.FAILED)
    assert [[t.turn_id for t in s] for s in await store.failure_streaks(1)] == [["x3"]]
