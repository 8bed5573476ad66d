"""Stop: a person ends every unfinished turn of a session, parked ones too, durably.

Runs on every store; the crash test (the stopping process dies before anything applied the
stop) on SQLite and PostgreSQL with real processes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent import (
    Agent,
    InputResolved,
    ResumeConflictError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolMessage,
    TurnCancelled,
    TurnStatus,
    tool,
)
from storage import SqlStore
from tests.support import children
from tests.support.engine_fixtures import RUN_LOG_ENV, read_runs
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, **kw: Any) -> Runtime:
    return Runtime(store, model, agent=agent, recovery_interval=0.05, poll_interval=0.02, **kw)


async def test_stop_ends_a_parked_turn_and_a_late_click_is_refused(store: SessionStore) -> None:
    agent, model = refund_agent(), refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(slack_event("refund order 42"), turn_id="T1")
        parked = await session.result(tid)
        assert parked.status == TurnStatus.SUSPENDED
        request = parked.request
        assert request is not None

        assert await session.stop(by="U9") == ["T1"]
        result = await session.result(tid)

        assert (result.status, result.reason) == (TurnStatus.CANCELLED, "stopped")
        assert await session.pending() == []
        row = await store.get_session("s1")
        assert row is not None
        assert row.status == "idle"
        with pytest.raises(ResumeConflictError) as refused:
            await session.resume("T1", request.id, True, by="U1", digest=request.digest)
        assert refused.value.http_status == 409
        assert await session.stop(by="U9") == [], "nothing left to stop"
        assert len(model.requests) == 1, "the parked turn never called the model again"
        # The session is no longer parked: a new message starts a turn (which parks again).
        again = await session.start(slack_event("refund order 43"), turn_id="T2")
        assert (await session.result(again)).status == TurnStatus.SUSPENDED

    transcript = await store.load_transcript("s1")
    assert [m.role for m in transcript][:3] == ["user", "assistant", "tool"]
    call = transcript[2]
    assert isinstance(call, ToolMessage)
    assert (call.call_id, call.result) == ("r1", {"cancelled": True})
    events = [e for e in await store.read_events("s1") if e.turn_id == "T1"]
    ended = [e for e in events if isinstance(e, InputResolved | TurnCancelled)]
    assert [(e.type, e.by) for e in ended] == [
        ("input.resolved", "U9"),
        ("turn.cancelled", "U9"),
    ]
    resolved = ended[0]
    assert isinstance(resolved, InputResolved)
    assert (resolved.input_id, resolved.outcome) == ("approve-refund", "cancelled")


async def test_stop_ends_the_running_turn_at_its_next_checkpoint_and_the_queued_ones(
    store: SessionStore,
) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Runs until released."""
        entered.set()
        await release.wait()
        return "done"

    @tool
    async def after() -> str:
        """Would run after `slow`."""
        raise AssertionError("ran after the stop")

    agent = Agent(name="a", instructions="x", tools=[slow, after])
    model = ScriptedModel(
        by_opening={
            "first": [
                ScriptedReply(
                    tool_calls=[
                        ToolCall(id="a", name="slow", input={}),
                        ToolCall(id="b", name="after", input={}),
                    ]
                )
            ],
            "second": [ScriptedReply(text="never")],
        }
    )
    # One call after another (tool_concurrency=1), so `after` has not started when Stop comes.
    async with _runtime(store, agent, model, tool_concurrency=1) as rt:
        session = rt.session(agent, "s1")
        first = await session.start("first", turn_id="t1")
        second = await session.start("second", turn_id="t2")
        await entered.wait()

        assert await session.stop(by="U3", reason="stop button") == ["t1", "t2"]
        release.set()
        one, two = await session.result(first), await session.result(second)

    assert (one.status, one.reason) == (TurnStatus.CANCELLED, "stop button")
    assert (two.status, two.reason) == (TurnStatus.CANCELLED, "stop button")
    transcript = await store.load_transcript("s1")
    results = [m.result for m in transcript if isinstance(m, ToolMessage)]
    assert results == ["done", {"cancelled": True}], "what committed stays; the rest is cancelled"
    assert all(m.turn_id == "t1" for m in transcript), "the queued turn never opened"
    cancelled = [e for e in await store.read_events("s1") if isinstance(e, TurnCancelled)]
    assert [(e.turn_id, e.by) for e in cancelled] == [("t1", "U3"), ("t2", "U3")]


async def test_stop_leaves_pending_confirmations_as_they_are(store: SessionStore) -> None:
    @tool(effect="write", confirmation="required")
    async def wire(to: str) -> dict[str, str]:
        """Wire money."""
        return {}

    agent = Agent(name="a", instructions="x", tools=[wire])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c1", name="wire", input={"to": "bob"})]),
            ScriptedReply(text="asked"),
        ]
    )
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("wire bob"), turn_id="T1")
        assert await session.stop(by="U1") == []
        [proposal] = await session.confirmations()
    assert proposal.status == "pending"


async def _child(url: str, run_log: Path, *args: str) -> children.Process:
    return await children.start(
        "tests.support.hitl_child", url, *args, env={RUN_LOG_ENV: str(run_log)}
    )


async def test_a_stop_committed_by_a_process_that_died_is_applied_by_the_next_worker(
    sql_url: str, tmp_path: Path
) -> None:
    run_log = tmp_path / "runs.log"
    parked = await children.finish(await _child(sql_url, run_log, "start", "T1"))
    assert parked[-1] == "RESULT suspended Asking for approval."

    stopper = await _child(sql_url, run_log, "stop", "T1", "U1")
    try:
        line = await children.wait_line(stopper, "STOPPED")
        assert line.split()[1:] == ["T1"]
    finally:
        await children.kill(stopper)  # dead before anything applied the stop

    store = await SqlStore.open(sql_url)
    try:
        session = await store.get_session("hitl:s")
        assert session is not None
        assert (session.status, session.pending) == ("running", None), "committed before it said"
        turn = await store.get_turn("hitl:s", "T1")
        assert turn is not None
        assert (turn.status, turn.cancel_reason, turn.cancelled_by) == (
            TurnStatus.QUEUED,
            "stopped",
            "U1",
        )
    finally:
        await store.close()

    recovered = await children.finish(await _child(sql_url, run_log, "recover", "T1"))
    assert recovered[-1] == "RESULT cancelled Asking for approval."
    assert read_runs(run_log) == ["before"], "the parked tool never ran again"
    store = await SqlStore.open(sql_url)
    try:
        transcript = await store.load_transcript("hitl:s")
        events = await store.read_events("hitl:s")
    finally:
        await store.close()
    assert [m.role for m in transcript] == ["user", "assistant", "tool"], "no model call"
    assert transcript[-1].result == {"cancelled": True}  # type: ignore[union-attr]
    cancelled = events[-1]
    assert isinstance(cancelled, TurnCancelled)
    assert (cancelled.reason, cancelled.by) == ("stopped", "U1")
