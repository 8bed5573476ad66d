"""The `SessionStore` contract, run against every implementation (`memory`, `sqlite`, `postgres`).

What a test here asserts, every store must do; where a backend is allowed to differ (the local
tool's store handle), the test asserts each backend's documented behaviour rather than skipping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import Connection, func, select, text

from agent import (
    ActionCompleted,
    AssistantMessage,
    FatalToolError,
    InboundEvent,
    LeaseLostError,
    Message,
    MessageDelta,
    ResumeConflictError,
    SessionStore,
    SessionSuspendedError,
    Speaker,
    StepConflictError,
    TextBlock,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    TurnCancelled,
    TurnCompleted,
    TurnInput,
    TurnStarted,
    TurnStatus,
    UserMessage,
)
from agent.seams import Lease, SessionStatus, StepCommit, StoreHandle
from storage import MemoryStore, SqlStore
from storage.sql.schema import confirmations, events, facts, messages, steps

S = "slack:T1:C1:100.0"
TTL = 30.0
NOW = 1_000.0


async def _queued_with_lease(store: SessionStore, turn_id: str = "t1", owner: str = "w1") -> Lease:
    await store.enqueue_turn(S, turn_id, TurnInput(text="hi"))
    lease = await store.acquire_lease(S, owner, TTL, NOW)
    assert lease is not None
    return lease


def _opening(turn_id: str = "t1", idx: int = 0) -> StepCommit:
    return StepCommit(
        turn_id=turn_id,
        step_id=f"input:{turn_id}:open",
        step_value={"text": "hi"},
        messages=[(idx, UserMessage(turn_id=turn_id, text="hi"))],
        events=[TurnStarted(session=S, turn_id=turn_id, text="hi")],
        turn_status=TurnStatus.RUNNING,
        session_status=SessionStatus.RUNNING,
    )


async def _nothing_committed(store: SessionStore, turn_id: str = "t1") -> None:
    assert await store.load_steps(S, turn_id) == {}
    assert await store.load_transcript(S) == []
    assert await store.read_events(S) == []
    if isinstance(store, SqlStore):
        for table in (steps, messages, events, confirmations, facts):
            count = select(func.count()).select_from(table).where(table.c.session_key == S)
            assert await store.run_sync(lambda c, q=count: c.execute(q).scalar_one()) == 0, table


# -- turns ----------------------------------------------------------------------------------


async def test_enqueue_is_idempotent_and_keeps_queue_order(store: SessionStore) -> None:
    inbound = InboundEvent(
        source="slack", text="hi", user=Speaker(id="U1", attested=True), raw={"secret": 1}
    )
    first, created1 = await store.enqueue_turn(S, "t1", TurnInput.of(inbound))
    second, created2 = await store.enqueue_turn(S, "t2", TurnInput(text="two"))
    again, created3 = await store.enqueue_turn(S, "t1", TurnInput(text="ignored"))

    assert (created1, created2, created3) == (True, True, False)
    assert again == first
    assert first.status is TurnStatus.QUEUED
    assert first.seq < second.seq
    assert first.input.text == "hi"
    assert first.input.inbound is not None
    assert first.input.inbound.raw is None
    assert [t.turn_id for t in await store.list_turns(S)] == ["t1", "t2"]
    assert await store.get_turn(S, "t1") == first
    next_turn = await store.next_turn(S)
    assert next_turn is not None
    assert next_turn.turn_id == "t1"
    session = await store.get_session(S)
    assert session is not None
    assert session.status is SessionStatus.NEW
    assert (session.lease_owner, session.lease_epoch) == (None, 0)


async def test_unknown_session_and_turn_read_as_none(store: SessionStore) -> None:
    assert await store.get_session("nope") is None
    assert await store.get_turn("nope", "t1") is None
    assert await store.next_turn("nope") is None
    assert await store.list_turns("nope") == []
    assert await store.acquire_lease("nope", "w1", TTL, NOW) is None


async def test_next_turn_skips_finished_turns(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    await store.enqueue_turn(S, "t2", TurnInput(text="two"))
    finish = StepCommit(turn_id="t1", turn_status=TurnStatus.COMPLETED, turn_result="ok")
    await store.commit(lease, finish, TTL, NOW)
    done = await store.get_turn(S, "t1")
    assert done is not None
    assert (done.status, done.result) == (TurnStatus.COMPLETED, "ok")
    next_turn = await store.next_turn(S)
    assert next_turn is not None
    assert next_turn.turn_id == "t2"


async def test_suspended_session_refuses_other_turns_but_not_the_parked_one(
    store: SessionStore,
) -> None:
    lease = await _queued_with_lease(store)
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending={"turn_id": "t1", "input_id": "approve"},
        ),
        TTL,
        NOW,
    )
    session = await store.get_session(S)
    assert session is not None
    assert session.status is SessionStatus.SUSPENDED
    assert session.pending == {"turn_id": "t1", "input_id": "approve"}

    with pytest.raises(SessionSuspendedError, match="t1"):
        await store.enqueue_turn(S, "t2", TurnInput(text="other"))
    assert [t.turn_id for t in await store.list_turns(S)] == ["t1"]

    parked, created = await store.enqueue_turn(S, "t1", TurnInput(text="hi"))
    assert (parked.turn_id, parked.status, created) == ("t1", TurnStatus.SUSPENDED, False)

    await store.commit(
        lease,
        StepCommit(turn_id="t1", session_status=SessionStatus.IDLE, set_pending=True),
        TTL,
        NOW,
    )
    session = await store.get_session(S)
    assert session is not None
    assert session.pending is None
    _, created = await store.enqueue_turn(S, "t2", TurnInput(text="other"))
    assert created


async def test_new_turns_queue_behind_a_reset_pending_on_a_parked_session(
    store: SessionStore,
) -> None:
    """The reset will cancel the park, so refusing the turn would only lose the message."""
    lease = await _queued_with_lease(store)
    park = StepCommit(
        turn_id="t1",
        turn_status=TurnStatus.SUSPENDED,
        session_status=SessionStatus.SUSPENDED,
        set_pending=True,
        pending={"turn_id": "t1", "input_id": "approve"},
    )
    await store.commit(lease, park, TTL, NOW)
    await store.enqueue_reset(S, "reset:1")

    queued, created = await store.enqueue_turn(S, "t2", TurnInput(text="after the reset"))
    assert (queued.turn_id, queued.status, queued.cancel_reason, created) == (
        "t2",
        TurnStatus.QUEUED,
        None,
        True,
    )
    assert [t.turn_id for t in await store.list_turns(S)] == ["t1", "reset:1", "t2"]
    first = await store.next_turn(S)
    assert first is not None
    assert first.turn_id == "reset:1", "the reset applies first"

    await store.apply_reset(lease, "reset:1", [], TTL, NOW)
    parked = await store.get_turn(S, "t1")
    assert parked is not None
    assert (parked.status, parked.cancel_reason) == (TurnStatus.CANCELLED, "reset")
    after = await store.next_turn(S)
    assert after is not None
    assert (after.turn_id, after.cancel_reason) == ("t2", None)
    assert [t.turn_id for t in await store.list_turns(S)] == ["t2"], "in the new generation"


async def test_a_parked_session_with_no_reset_pending_still_refuses_other_turns(
    store: SessionStore,
) -> None:
    """A reset that already applied is no longer pending: a later park refuses again."""
    lease = await _queued_with_lease(store)
    await store.enqueue_reset(S, "reset:1")
    await store.commit(lease, StepCommit(turn_id="t1", turn_status=TurnStatus.CANCELLED), TTL, NOW)
    await store.apply_reset(lease, "reset:1", [], TTL, NOW)
    await store.enqueue_turn(S, "t2", TurnInput(text="two"))
    park = StepCommit(
        turn_id="t2",
        turn_status=TurnStatus.SUSPENDED,
        session_status=SessionStatus.SUSPENDED,
        set_pending=True,
        pending={"turn_id": "t2", "input_id": "approve"},
    )
    await store.commit(lease, park, TTL, NOW)
    with pytest.raises(SessionSuspendedError, match="t2"):
        await store.enqueue_turn(S, "t3", TurnInput(text="three"))


async def test_concurrent_enqueue_of_one_turn_creates_it_once(
    store: SessionStore, store_url: str | None
) -> None:
    """Two processes racing a Slack retry: separate SQL stores (engines) on one database."""
    other = store
    if store_url is not None:
        other = await SqlStore.open(store_url)
    try:
        stores = [store, other] * 4
        results = await asyncio.gather(
            *(s.enqueue_turn(S, "t1", TurnInput(text="hi")) for s in stores)
        )
    finally:
        if other is not store:
            await other.close()
    assert sum(created for _, created in results) == 1
    assert len({record.seq for record, _ in results}) == 1
    assert len(await store.list_turns(S)) == 1


# -- leases ---------------------------------------------------------------------------------


async def test_lease_is_exclusive_until_it_expires_and_takeover_bumps_epoch(
    store: SessionStore,
) -> None:
    first = await _queued_with_lease(store, owner="w1")
    assert first.epoch == 1
    assert await store.acquire_lease(S, "w2", TTL, NOW + TTL - 1) is None

    second = await store.acquire_lease(S, "w2", TTL, NOW + TTL + 1)
    assert second is not None
    assert (second.owner, second.epoch) == ("w2", 2)
    assert not await store.renew_lease(first, TTL, NOW + TTL + 2)
    assert await store.renew_lease(second, TTL, NOW + TTL + 2)

    await store.release_lease(first)  # stale: must not free the new holder's lease
    session = await store.get_session(S)
    assert session is not None
    assert (session.lease_owner, session.lease_epoch) == ("w2", 2)
    assert session.lease_expires_at == NOW + 2 * TTL + 2

    await store.release_lease(second)
    third = await store.acquire_lease(S, "w3", TTL, NOW + TTL + 3)
    assert third is not None
    assert third.epoch == 3


async def test_stale_epoch_commit_raises_and_commits_nothing(store: SessionStore) -> None:
    zombie = await _queued_with_lease(store, owner="w1")
    fresh = await store.acquire_lease(S, "w2", TTL, NOW + TTL + 1)
    assert fresh is not None

    with pytest.raises(LeaseLostError):
        await store.commit(zombie, _opening(), TTL, NOW + TTL + 2)
    await _nothing_committed(store)
    turn = await store.get_turn(S, "t1")
    session = await store.get_session(S)
    assert turn is not None
    assert turn.status is TurnStatus.QUEUED
    assert session is not None
    assert session.status is SessionStatus.NEW

    committed = await store.commit(fresh, _opening(), TTL, NOW + TTL + 2)
    assert [e.seq for e in committed] == [1]


# -- commits --------------------------------------------------------------------------------


async def test_commit_writes_step_messages_and_events_with_gapless_seqs(
    store: SessionStore,
) -> None:
    lease = await _queued_with_lease(store)
    opened = await store.commit(lease, _opening(), TTL, NOW + 1)
    reply = AssistantMessage(turn_id="t1", content=(TextBlock(text="hello"),), stop_reason="end")
    finished = await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            step_id="model:1",
            step_value={"content": [{"kind": "text", "text": "hello"}]},
            messages=[(1, reply)],
            events=[
                ActionCompleted(session=S, turn_id="t1", call_id="c1", name="x", result={"a": 1}),
                TurnCompleted(session=S, turn_id="t1", text="hello"),
            ],
            turn_status=TurnStatus.COMPLETED,
            turn_result={"text": "hello"},
            session_status=SessionStatus.IDLE,
        ),
        TTL,
        NOW + 2,
    )

    assert [e.seq for e in opened] == [1]
    assert [(e.seq, e.type) for e in finished] == [(2, "action.completed"), (3, "turn.completed")]
    assert await store.read_events(S) == [*opened, *finished]
    assert await store.load_transcript(S) == [UserMessage(turn_id="t1", text="hi"), reply]
    assert await store.load_steps(S, "t1") == {
        "input:t1:open": {"text": "hi"},
        "model:1": {"content": [{"kind": "text", "text": "hello"}]},
    }
    turn = await store.get_turn(S, "t1")
    assert turn is not None
    assert (turn.status, turn.result) == (
        TurnStatus.COMPLETED,
        {"text": "hello"},
    )
    session = await store.get_session(S)
    assert session is not None
    assert (session.status, session.lease_expires_at) == (SessionStatus.IDLE, NOW + 2 + TTL)


async def test_duplicate_step_or_message_conflicts_and_commits_nothing(
    store: SessionStore,
) -> None:
    lease = await _queued_with_lease(store)
    await store.commit(lease, _opening(), TTL, NOW)
    before = (await store.load_steps(S, "t1"), await store.load_transcript(S))

    duplicate_step = StepCommit(
        turn_id="t1",
        step_id="input:t1:open",
        messages=[(1, ToolMessage(turn_id="t1", call_id="c1", name="x", result=1))],
        events=[TurnCompleted(session=S, turn_id="t1", text="")],
        turn_status=TurnStatus.COMPLETED,
    )
    with pytest.raises(StepConflictError):
        await store.commit(lease, duplicate_step, TTL, NOW)
    duplicate_message = StepCommit(
        turn_id="t1",
        step_id="model:1",
        messages=[(0, UserMessage(turn_id="t1", text="again"))],
        events=[TurnCompleted(session=S, turn_id="t1", text="")],
    )
    with pytest.raises(StepConflictError):
        await store.commit(lease, duplicate_message, TTL, NOW)

    assert (await store.load_steps(S, "t1"), await store.load_transcript(S)) == before
    assert [e.seq for e in await store.read_events(S)] == [1]
    turn = await store.get_turn(S, "t1")
    assert turn is not None
    assert turn.status is TurnStatus.RUNNING
    nxt = await store.commit(
        lease,
        StepCommit(turn_id="t1", events=[TurnStarted(session=S, turn_id="t1", text="")]),
        TTL,
        NOW,
    )
    assert [e.seq for e in nxt] == [2]


def _conversation() -> list[Message]:
    """Three turns: a (0-3, a tool call), b (4-5), c (6-10, opened by a trigger, two calls)."""

    def said(turn: str, text: str) -> AssistantMessage:
        return AssistantMessage(turn_id=turn, content=(TextBlock(text=text),), stop_reason="end")

    def calls(turn: str, *ids: str) -> AssistantMessage:
        content = tuple(ToolCall(id=i, name="lookup", input={"q": i}) for i in ids)
        return AssistantMessage(turn_id=turn, content=content, stop_reason="tool_use")

    def result(turn: str, call: str) -> ToolMessage:
        return ToolMessage(turn_id=turn, call_id=call, name="lookup", result=call)

    return [
        UserMessage(turn_id="a", text="first"),
        calls("a", "a1"),
        result("a", "a1"),
        said("a", "done a"),
        UserMessage(turn_id="b", text="second"),
        said("b", "done b"),
        TriggerMessage(turn_id="c", text="scheduled", by="clock", kind="schedule"),
        calls("c", "c1", "c2"),
        result("c", "c1"),
        result("c", "c2"),
        said("c", "done c"),
    ]


async def test_the_transcript_tail_starts_where_a_turn_starts(store: SessionStore) -> None:
    empty = await store.load_transcript_tail(S, 5)
    assert (empty.base, empty.messages) == (0, [])
    lease = await _queued_with_lease(store)
    conversation = _conversation()
    for idx, message in enumerate(conversation):
        commit = StepCommit(turn_id="t1", messages=[(idx, message)])
        await store.commit(lease, commit, TTL, NOW + 1)
    # at least n of the latest, back to the opening of the turn the earliest belongs to
    for at_least, base in [(1, 6), (5, 6), (6, 4), (7, 4), (8, 0), (11, 0), (500, 0)]:
        tail = await store.load_transcript_tail(S, at_least)
        assert (tail.base, tail.messages) == (base, conversation[base:]), at_least
    assert await store.load_transcript(S) == conversation


async def test_read_events_after_seq_with_limit(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    batch = [TurnStarted(session=S, turn_id="t1", text=str(i)) for i in range(5)]
    await store.commit(lease, StepCommit(turn_id="t1", events=batch), TTL, NOW)

    assert [e.seq for e in await store.read_events(S, after_seq=2)] == [3, 4, 5]
    assert [e.seq for e in await store.read_events(S, after_seq=1, limit=2)] == [2, 3]
    assert await store.read_events(S, after_seq=5) == []
    assert await store.read_events("other") == []


async def test_load_steps_in_commit_order_for_one_turn(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    order = [("tool:1:b", "t1"), ("tool:1:a", "t1"), ("x", "t2"), ("model:2", "t1")]
    for step_id, turn_id in order:
        await store.commit(
            lease, StepCommit(turn_id=turn_id, step_id=step_id, step_value=step_id), TTL, NOW
        )
    assert list(await store.load_steps(S, "t1")) == ["tool:1:b", "tool:1:a", "model:2"]
    assert await store.load_steps(S, "t2") == {"x": "x"}


async def test_values_read_back_are_copies(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    value: dict[str, Any] = {"items": [1]}
    await store.commit(lease, StepCommit(turn_id="t1", step_id="s", step_value=value), TTL, NOW)
    value["items"].append(2)
    loaded = await store.load_steps(S, "t1")
    assert loaded == {"s": {"items": [1]}}
    loaded["s"]["items"].append(3)
    assert await store.load_steps(S, "t1") == {"s": {"items": [1]}}


async def test_cancelled_turn_records_the_reason_of_its_event(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            events=[TurnCancelled(session=S, turn_id="t1", reason="superseded")],
            turn_status=TurnStatus.CANCELLED,
        ),
        TTL,
        NOW,
    )
    turn = await store.get_turn(S, "t1")
    assert turn is not None
    assert (turn.status, turn.cancel_reason) == (
        TurnStatus.CANCELLED,
        "superseded",
    )


async def test_live_deltas_are_never_committed(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    delta = MessageDelta(session=S, turn_id="t1", text="tok")
    with pytest.raises(ValueError, match="live only"):
        await store.commit(lease, StepCommit(turn_id="t1", events=[delta]), TTL, NOW)
    await _nothing_committed(store)


async def test_recoverable_sessions_have_unfinished_turns_and_no_live_lease(
    store: SessionStore,
) -> None:
    await store.enqueue_turn("free", "t1", TurnInput(text="a"))
    await store.enqueue_turn("held", "t1", TurnInput(text="b"))
    held = await store.acquire_lease("held", "w1", TTL, NOW)
    await store.enqueue_turn("done", "t1", TurnInput(text="c"))
    done = await store.acquire_lease("done", "w1", TTL, NOW)
    assert held is not None
    assert done is not None
    await store.commit(done, StepCommit(turn_id="t1", turn_status=TurnStatus.COMPLETED), TTL, NOW)
    await store.release_lease(done)

    assert await store.recoverable_sessions(NOW + 1) == ["free"]
    assert await store.recoverable_sessions(NOW + TTL + 1) == ["free", "held"]


# -- local tools ----------------------------------------------------------------------------


@pytest.fixture
async def tool_notes(store: SessionStore) -> AsyncIterator[None]:
    """A user's own table for local tools to write to (SQL stores only); dropped afterwards."""
    if not isinstance(store, SqlStore):
        yield
        return
    await store.run_sync(
        lambda c: c.execute(text("CREATE TABLE tool_notes (note TEXT NOT NULL)")), write=True
    )
    yield
    await store.run_sync(lambda c: c.execute(text("DROP TABLE tool_notes")), write=True)


async def _notes(store: SqlStore) -> list[str]:
    return await store.run_sync(
        lambda c: list(c.execute(text("SELECT note FROM tool_notes")).scalars())
    )


def _tool_step(note: str) -> StepCommit:
    return StepCommit(
        turn_id="t1",
        step_id="tool:1:c1",
        step_value={"noted": note},
        messages=[(1, ToolMessage(turn_id="t1", call_id="c1", name="note", result=note))],
        events=[ActionCompleted(session=S, turn_id="t1", call_id="c1", name="note", result=note)],
    )


class ToolBroke(Exception):
    pass


@pytest.mark.usefixtures("tool_notes")
async def test_local_tool_commits_with_its_step(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)

    def run(handle: StoreHandle) -> str:
        if isinstance(store, SqlStore):
            conn = handle.unwrap()
            assert isinstance(conn, Connection)
            conn.execute(text("INSERT INTO tool_notes (note) VALUES (:n)"), {"n": "written"})
        else:
            with pytest.raises(FatalToolError, match="no transactional store handle"):
                handle.unwrap()
        return "written"

    result, committed = await store.commit_local(lease, run, _tool_step, TTL, NOW)

    assert result == "written"
    assert [(e.seq, e.type) for e in committed] == [(1, "action.completed")]
    assert await store.load_steps(S, "t1") == {"tool:1:c1": {"noted": "written"}}
    assert len(await store.load_transcript(S)) == 1
    if isinstance(store, SqlStore):
        assert await _notes(store) == ["written"]


@pytest.mark.usefixtures("tool_notes")
async def test_local_tool_that_raises_leaves_nothing_behind(store: SessionStore) -> None:
    lease = await _queued_with_lease(store)
    boom = ToolBroke("disk on fire")

    def run(handle: StoreHandle) -> str:
        if isinstance(store, SqlStore):
            handle.unwrap().execute(text("INSERT INTO tool_notes (note) VALUES ('ghost')"))
        raise boom

    with pytest.raises(ToolBroke) as raised:
        await store.commit_local(lease, run, _tool_step, TTL, NOW)

    assert raised.value is boom
    await _nothing_committed(store)
    if isinstance(store, SqlStore):
        assert await _notes(store) == []
    assert [e.seq for e in (await store.commit(lease, _opening(), TTL, NOW))] == [1]


async def test_store_handle_refuses_where_it_cannot_be_honoured(store: SessionStore) -> None:
    """Memory has no handle at all; a SQL handle dies with its step's transaction."""
    lease = await _queued_with_lease(store)
    if isinstance(store, MemoryStore):
        with pytest.raises(FatalToolError, match="no transactional store handle"):
            await store.commit_local(lease, lambda h: h.unwrap(), _tool_step, TTL, NOW)
        await _nothing_committed(store)
    else:
        kept: list[StoreHandle] = []
        await store.commit_local(lease, kept.append, lambda _r: _tool_step("x"), TTL, NOW)
        with pytest.raises(FatalToolError, match="after its step"):
            kept[0].unwrap()


async def test_local_tool_never_runs_on_a_lost_lease(store: SessionStore) -> None:
    zombie = await _queued_with_lease(store)
    assert await store.acquire_lease(S, "w2", TTL, NOW + TTL + 1) is not None
    ran: list[bool] = []

    with pytest.raises(LeaseLostError):
        await store.commit_local(
            zombie, lambda _h: ran.append(True), lambda _r: _tool_step("x"), TTL, NOW + TTL + 2
        )
    assert ran == []
    await _nothing_committed(store)


# -- a write of the application's, committed with the enqueue ---------------------------------


class _Probe:
    """An `alongside` write that records each call and, on SQL, inserts a row in a table of the
    test's own, so whether it committed can be read back."""

    def __init__(self, store: SessionStore, *, fail: bool = False) -> None:
        self.store, self.fail, self.calls = store, fail, 0

    def __call__(self, handle: StoreHandle) -> None:
        self.calls += 1
        if isinstance(self.store, SqlStore):
            handle.unwrap().execute(text("INSERT INTO alongside_probe (n) VALUES (1)"))
        if self.fail:
            raise RuntimeError("the application's write failed")

    async def committed(self) -> int | None:
        """Rows the write left committed; None on memory, which has no transaction to put the
        application's write in (it gets a handle that refuses, like a local tool's)."""
        if not isinstance(self.store, SqlStore):
            return None
        query = text("SELECT count(*) FROM alongside_probe")
        return int(await self.store.run_sync(lambda c: c.execute(query).scalar_one()))


@pytest.fixture
async def probe_table(store: SessionStore) -> None:
    if isinstance(store, SqlStore):
        create = text("CREATE TABLE IF NOT EXISTS alongside_probe (n INTEGER)")
        await store.run_sync(lambda c: c.execute(create), write=True)


async def test_alongside_commits_with_the_queued_turn(
    store: SessionStore, probe_table: None
) -> None:
    probe = _Probe(store)
    record, created = await store.enqueue_turn(S, "t1", TurnInput(text="hi"), alongside=probe)
    assert created
    assert record.status is TurnStatus.QUEUED
    assert probe.calls == 1
    assert await probe.committed() in (1, None)

    # A re-delivered turn id queues nothing, and the write runs again (it is the app's record
    # of this delivery, e.g. where replies go, which a retry may be the only copy of).
    _, created = await store.enqueue_turn(S, "t1", TurnInput(text="hi"), alongside=probe)
    assert not created
    assert probe.calls == 2
    assert await probe.committed() in (2, None)
    assert [t.turn_id for t in await store.list_turns(S)] == ["t1"]


async def test_a_failing_alongside_write_queues_nothing(
    store: SessionStore, probe_table: None
) -> None:
    probe = _Probe(store, fail=True)
    with pytest.raises(RuntimeError, match="application's write failed"):
        await store.enqueue_turn(S, "t1", TurnInput(text="hi"), alongside=probe)
    assert probe.calls == 1
    assert await store.get_turn(S, "t1") is None
    assert await store.list_turns(S) == []
    assert await probe.committed() in (0, None)
    # Nothing was left half done: the same turn queues normally afterwards.
    _, created = await store.enqueue_turn(S, "t1", TurnInput(text="hi"))
    assert created


async def test_alongside_does_not_run_when_a_parked_session_refuses_the_turn(
    store: SessionStore, probe_table: None
) -> None:
    lease = await _queued_with_lease(store)
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending={"turn_id": "t1", "input_id": "approve"},
        ),
        TTL,
        NOW,
    )
    probe = _Probe(store)
    with pytest.raises(SessionSuspendedError):
        await store.enqueue_turn(S, "t2", TurnInput(text="other"), alongside=probe)
    assert probe.calls == 0
    assert await probe.committed() in (0, None)
    # The parked turn itself, delivered again, is not refused: its write runs.
    await store.enqueue_turn(S, "t1", TurnInput(text="hi"), alongside=probe)
    assert probe.calls == 1
    assert await probe.committed() in (1, None)


async def _parked_on_t1(store: SessionStore) -> dict[str, Any]:
    lease = await _queued_with_lease(store)
    pending = {"turn_id": "t1", "input_id": "approve"}
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            set_pending=True,
            pending=pending,
        ),
        TTL,
        NOW,
    )
    await store.release_lease(lease)
    return pending


async def _answer_t1(store: SessionStore, pending: Any, value: bool, probe: Any = None) -> None:
    await store.resume_turn(
        S,
        "t1",
        expected_pending=pending,
        answer_step="input:t1:approve",
        answer=value,
        alongside=probe,
    )


async def test_alongside_commits_with_an_applied_answer(
    store: SessionStore, probe_table: None
) -> None:
    """What the host records about an answer (e.g. that the thread must be rendered again)
    exists exactly when the answer does."""
    pending = await _parked_on_t1(store)
    probe = _Probe(store)
    await _answer_t1(store, pending, True, probe)
    assert probe.calls == 1
    assert await probe.committed() in (1, None)
    assert (await store.get_turn(S, "t1")).status is TurnStatus.QUEUED

    # A second answer conflicts: its write does not run.
    with pytest.raises(ResumeConflictError):
        await _answer_t1(store, pending, False, probe)
    assert probe.calls == 1
    assert await probe.committed() in (1, None)


async def test_a_failing_alongside_write_applies_no_answer(
    store: SessionStore, probe_table: None
) -> None:
    pending = await _parked_on_t1(store)
    probe = _Probe(store, fail=True)
    with pytest.raises(RuntimeError, match="application's write failed"):
        await _answer_t1(store, pending, True, probe)
    assert (await store.get_turn(S, "t1")).status is TurnStatus.SUSPENDED
    assert "input:t1:approve" not in await store.load_steps(S, "t1")
    assert await probe.committed() in (0, None)
    # The same answer applies normally afterwards.
    await _answer_t1(store, pending, True)
    assert (await store.get_turn(S, "t1")).status is TurnStatus.QUEUED
