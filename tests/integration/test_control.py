"""Cancellation at each checkpoint boundary, replace (debounce), reset, proactive turns and
per-source policies."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from agent import (
    Agent,
    AgentError,
    ResumeConflictError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    SessionSuspendedError,
    ToolCall,
    ToolContext,
    ToolMessage,
    TriggerMessage,
    TurnEvent,
    TurnStatus,
    load_agent,
    tool,
)
from agent.seams import TurnKind
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event


def _rt(store: SessionStore, model: ScriptedModel, agent: Agent, **kw: Any) -> Runtime:
    return Runtime(store, model, agent=agent, recovery_interval=0.05, poll_interval=0.02, **kw)


def _roles(transcript: list[Any]) -> list[str]:
    return [m.role for m in transcript]


# cancellation ---------------------------------------------------------------------------------


async def test_cancel_before_the_opening_commits(store: SessionStore) -> None:
    gate = asyncio.Event()

    @tool
    async def wait() -> str:
        """Blocks the session until released."""
        await gate.wait()
        return "ok"

    agent = Agent(name="a", instructions="x", tools=[wait])
    model = ScriptedModel(
        by_opening={
            "first": [
                ScriptedReply(tool_calls=[ToolCall(id="w", name="wait", input={})]),
                ScriptedReply(text="done"),
            ],
            "second": [ScriptedReply(text="never")],
        }
    )
    async with _rt(store, model, agent) as rt:
        session = rt.session(agent, "s1")
        t1 = await session.start("first")
        t2 = await session.start("second")
        assert await session.cancel(t2, "user changed their mind")
        gate.set()
        assert (await session.result(t1)).status == TurnStatus.COMPLETED
        r2 = await session.result(t2)
    assert (r2.status, r2.reason) == (TurnStatus.CANCELLED, "user changed their mind")
    transcript = await store.load_transcript("s1")
    assert all(m.turn_id == t1 for m in transcript), (
        "a turn cancelled before it opened left no message"
    )
    events = [e for e in await store.read_events("s1") if e.turn_id == t2]
    assert [(e.type, getattr(e, "reason", None)) for e in events] == [
        ("turn.cancelled", "user changed their mind")
    ]


def _cancelling_tool(session_ref: dict[str, Any]) -> Any:
    @tool
    async def stop_here(ctx: ToolContext) -> str:
        """Asks for the turn to be cancelled, then finishes normally."""
        await session_ref["session"].cancel(ctx.turn_id, "stop requested")
        return "stopped"

    return stop_here


@tool
async def other() -> str:
    """Should never run after the cancel."""
    raise AssertionError("ran after cancellation")


async def test_cancel_between_tool_calls_gives_unrun_calls_a_cancelled_result(
    store: SessionStore,
) -> None:
    ref: dict[str, Any] = {}
    agent = Agent(name="a", instructions="x", tools=[_cancelling_tool(ref), other])
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ToolCall(id="a", name="stop_here", input={}),
                    ToolCall(id="b", name="other", input={}),
                ]
            )
        ]
    )
    # One call after another (tool_concurrency=1): the call after the cancel never starts. Side
    # by side, a call already running is reached by the signal (tests/integration/
    # test_parallel_tools.py).
    async with _rt(store, model, agent, tool_concurrency=1) as rt:
        ref["session"] = session = rt.session(agent, "s1")
        result = await session.turn("go")
    assert (result.status, result.reason) == (TurnStatus.CANCELLED, "stop requested")
    transcript = await store.load_transcript("s1")
    assert _roles(transcript) == ["user", "assistant", "tool", "tool"]
    assert isinstance(transcript[2], ToolMessage)
    assert transcript[2].result == "stopped"  # what committed stays committed
    assert transcript[3].result == {"cancelled": True}
    assert (await store.read_events("s1"))[-1].type == "turn.cancelled"


async def test_cancel_before_the_model_call(store: SessionStore) -> None:
    ref: dict[str, Any] = {}
    agent = Agent(name="a", instructions="x", tools=[_cancelling_tool(ref)])
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ToolCall(id="a", name="stop_here", input={})])]
    )
    async with _rt(store, model, agent) as rt:
        ref["session"] = session = rt.session(agent, "s1")
        result = await session.turn("go")
    assert result.status == TurnStatus.CANCELLED
    assert len(model.requests) == 1, "no model call after the cancel"
    assert _roles(await store.load_transcript("s1")) == ["user", "assistant", "tool"]


async def test_cancel_between_model_deltas_commits_nothing_of_the_step(
    store: SessionStore,
) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel(
        [ScriptedReply(text=["one ", "two ", "three ", "four"])], delta_delay=0.02
    )
    async with _rt(store, model, agent) as rt:
        session = rt.session(agent, "s1")
        seen: list[str] = []

        async def on_event(event: TurnEvent) -> None:
            if event.type == "message.delta":
                seen.append(event.text)
                if len(seen) == 1:
                    await session.cancel(event.turn_id, "too slow")

        await session.observe(on_event)
        result = await session.turn("go")
    assert (result.status, result.reason) == (TurnStatus.CANCELLED, "too slow")
    assert seen == ["one "]
    assert _roles(await store.load_transcript("s1")) == ["user"]


# replace --------------------------------------------------------------------------------------


async def test_replace_storm_leaves_exactly_one_turn(store: SessionStore) -> None:
    ran: list[tuple[str, float]] = []
    storm_over = asyncio.Event()

    @tool
    async def work(ctx: ToolContext) -> str:
        """Takes until the storm is over: however slow the machine, no turn can finish before
        the next message arrives (one that did would rightly stay completed)."""
        ran.append((ctx.turn_id, time.monotonic()))
        await asyncio.wait_for(storm_over.wait(), 10)
        return "worked"

    agent = Agent(name="a", instructions="x", tools=[work])

    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0:
            return ScriptedReply(tool_calls=[ToolCall(id="w", name="work", input={})])
        return ScriptedReply(text="finished")

    async with _rt(store, ScriptedModel(responder=respond), agent) as rt:
        session = rt.session(agent, "s1")
        ids: list[str] = []
        superseded_at: dict[str, float] = {}
        for i in range(5):
            tid = await session.start(f"message {i}", replace=True)
            if ids:
                superseded_at[ids[-1]] = time.monotonic()
                for earlier in ids[:-1]:
                    superseded_at.setdefault(earlier, time.monotonic())
            ids.append(tid)
            await asyncio.sleep(0.01)
        storm_over.set()
        results = [await session.result(t) for t in ids]
    statuses = [r.status for r in results]
    assert statuses.count(TurnStatus.COMPLETED) == 1
    assert statuses[-1] == TurnStatus.COMPLETED
    assert all(r.status == TurnStatus.CANCELLED and r.reason == "replaced" for r in results[:-1])
    for turn_id, started in ran:
        if turn_id in superseded_at:
            assert started < superseded_at[turn_id], "a tool ran after its turn was superseded"


class _ReadsBeforeTheCancel:
    """A store whose `next_turn` answers with what it read before a replace committed: the
    worker holds the turn's record, but its runner is not registered yet."""

    def __init__(self, inner: SessionStore, turn_id: str) -> None:
        self._inner = inner
        self._turn_id = turn_id
        self.read = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def next_turn(self, session: str) -> Any:
        record = await self._inner.next_turn(session)
        if record is not None and record.turn_id == self._turn_id and not self.read.is_set():
            self.read.set()
            await self.release.wait()
        return record


async def test_a_replace_while_the_worker_reads_its_next_turn_still_stops_it(
    store: SessionStore,
) -> None:
    ran: list[str] = []

    @tool
    async def work(ctx: ToolContext) -> str:
        """Records which turn ran it."""
        ran.append(ctx.turn_id)
        return "worked"

    agent = Agent(name="a", instructions="x", tools=[work])

    def respond(request: Any, step: int) -> ScriptedReply:
        if step % 2 == 0:
            return ScriptedReply(tool_calls=[ToolCall(id=f"w{step}", name="work", input={})])
        return ScriptedReply(text="finished")

    slow = _ReadsBeforeTheCancel(store, "first")
    async with _rt(slow, ScriptedModel(responder=respond), agent) as rt:  # type: ignore[arg-type]
        session = rt.session(agent, "s1")
        await session.start("message 1", turn_id="first")
        await asyncio.wait_for(slow.read.wait(), 10)
        await session.start("message 2", turn_id="second", replace=True)
        slow.release.set()
        first = await session.result("first")
        second = await session.result("second")
    assert (first.status, first.reason) == (TurnStatus.CANCELLED, "replaced")
    assert second.status == TurnStatus.COMPLETED
    assert ran == ["second"], "the superseded turn ran a tool"


async def test_replace_never_cancels_a_parked_turn(store: SessionStore) -> None:
    agent = refund_agent()
    async with _rt(store, refund_model(), agent) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(slack_event("refund order 42"), turn_id="T1")
        assert (await session.result(tid)).status == TurnStatus.SUSPENDED
        with pytest.raises(SessionSuspendedError):
            await session.start(slack_event("newer message"), replace=True)
        assert (await store.get_turn("s1", "T1")).status == TurnStatus.SUSPENDED
        await session.resume("T1", "approve-refund", True, by="U1")
        assert (await session.result("T1")).status == TurnStatus.COMPLETED


# reset ----------------------------------------------------------------------------------------


async def test_reset_archives_the_generation_and_starts_empty(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel([ScriptedReply(text="hello")])
    async with _rt(store, model, agent) as rt:
        session = rt.session(agent, "s1")
        await session.turn("first", turn_id="T1")
        before_events = await store.read_events("s1")
        reset = await session.reset()
        assert (reset.previous_session, reset.generation) == ("s1#g0", 1)
        assert await store.load_transcript("s1") == []
        archive = await store.read_archive("s1", 0)
        assert [m.role for m in archive.messages] == ["user", "assistant"]
        assert list(archive.steps) == ["model:1"]
        assert [e.seq for e in archive.events] == [e.seq for e in before_events]
        assert (await store.get_session("s1")).status == "new"

        await session.turn("second", turn_id="T2")
        assert [m.text for m in model.requests[-1].messages] == ["second"]
        assert min(e.seq for e in await store.read_events("s1")) > before_events[-1].seq
        second = await session.reset()
        assert (second.previous_session, second.generation) == ("s1#g1", 2)
        # a retry of a message from before the reset is still recognised
        assert (await session.turn("first", turn_id="T1")).replayed


async def test_reset_archives_a_stale_park_and_resume_is_refused_while_pending(
    store: SessionStore,
) -> None:
    agent = refund_agent()
    async with _rt(store, refund_model(), agent) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(slack_event("refund order 42"), turn_id="T1")
        assert (await session.result(tid)).status == TurnStatus.SUSPENDED
        await store.enqueue_reset("s1", "reset:manual")  # queued, not yet applied
        with pytest.raises(ResumeConflictError):
            await session.resume("T1", "approve-refund", True, by="U1")
        rt.kick("s1")
        await session.result("reset:manual")
        assert await session.pending() == []
        parked = await store.get_turn("s1", "T1")
        assert (parked.status, parked.cancel_reason) == (TurnStatus.CANCELLED, "reset")
        with pytest.raises(ResumeConflictError):
            await session.resume("T1", "approve-refund", True, by="U1")
        new = await session.start(slack_event("fresh start"), turn_id="T2")
        assert (await session.result(new)).status == TurnStatus.SUSPENDED  # its own park


class _SaysWhenResetQueued:
    """A store that lets the test know when a reset has been queued (and not yet applied)."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self.reset_queued = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def enqueue_reset(self, session: str, reset_id: str) -> Any:
        record = await self._inner.enqueue_reset(session, reset_id)
        self.reset_queued.set()
        return record


async def test_a_message_to_a_parked_session_queues_behind_a_pending_reset(
    store: SessionStore,
) -> None:
    """A web process queues the reset and then a new message; a worker applies both, in order."""
    agent = refund_agent()
    refund = ToolCall(id="r1", name="issue_refund", input={"order_id": "42", "amount": 30})
    model = ScriptedModel(
        by_opening={
            "refund order 42": [ScriptedReply(tool_calls=[refund])],
            "after the reset": [ScriptedReply(text="fresh")],
        }
    )
    async with _rt(store, model, agent) as worker:
        parked = await worker.session(agent, "s1").start(slack_event("refund order 42"))
        assert (await worker.session(agent, "s1").result(parked)).status == TurnStatus.SUSPENDED

    web_store = _SaysWhenResetQueued(store)
    web = _rt(web_store, model, agent, run_turns=False)  # type: ignore[arg-type]
    session = web.session(agent, "s1")
    reset_task = asyncio.create_task(session.reset())
    try:
        await asyncio.wait_for(web_store.reset_queued.wait(), 60)
        queued = await store.next_turn("s1")
        assert queued is not None
        assert queued.turn_id.startswith("reset:"), "the reset is pending, not applied"
        tid = await session.start(slack_event("after the reset"), turn_id="T2")
        async with _rt(store, model, agent) as worker, asyncio.timeout(60):
            reset = await reset_task
            result = await worker.session(agent, "s1").result(tid)
    finally:
        reset_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reset_task
        await web.close()
    assert (result.status, result.text) == (TurnStatus.COMPLETED, "fresh")
    assert [m.text for m in model.requests[-1].messages] == ["after the reset"]
    assert reset.generation == 1
    cancelled = await store.get_turn("s1", parked)
    assert (cancelled.status, cancelled.cancel_reason) == (TurnStatus.CANCELLED, "reset")


async def _until_queued(store: SessionStore, session: str, kind: TurnKind) -> None:
    """Wait until a turn of `kind` is durably queued on `session` (what a test orders by)."""
    async with asyncio.timeout(30):
        while True:
            if any(t.kind == kind for t in await store.list_turns(session)):
                return
            await asyncio.sleep(0.01)  # a store offers nothing to wait on: poll it


async def test_turn_queued_behind_a_reset_starts_from_an_empty_transcript(
    store: SessionStore,
) -> None:
    gate = asyncio.Event()
    entered = asyncio.Event()

    @tool
    async def wait() -> str:
        """Blocks until released."""
        entered.set()
        await gate.wait()
        return "ok"

    agent = Agent(name="a", instructions="x", tools=[wait])
    model = ScriptedModel(
        by_opening={
            "first": [ScriptedReply(tool_calls=[ToolCall(id="w", name="wait", input={})])],
            "after": [ScriptedReply(text="fresh")],
        }
    )
    async with _rt(store, model, agent) as rt:
        session = rt.session(agent, "s1")
        t1 = await session.start("first")
        await entered.wait()
        reset_task = asyncio.create_task(session.reset())
        await _until_queued(store, "s1", TurnKind.RESET)  # the reset goes first, then "after"
        t2 = await session.start("after")
        gate.set()
        reset = await reset_task
        assert (await session.result(t1)).reason == "reset"
        assert (await session.result(t2)).text == "fresh"
    assert reset.generation == 1
    assert [m.text for m in model.requests[-1].messages] == ["after"]
    archived = await store.read_archive("s1", 0)
    assert _roles(archived.messages) == ["user", "assistant", "tool"]


# proactive turns ------------------------------------------------------------------------------


async def test_proactive_turn_is_a_trigger_message_attributed_to_its_source(
    store: SessionStore,
) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel([ScriptedReply(text="Here are today's highlights.")])
    async with _rt(store, model, agent) as rt:
        session = rt.session(agent, "slack:T1:C-ops:daily")
        fire: dict[str, Any] = {
            "by": "cron:daily",
            "workspace": {"team": "T1"},
            "turn_id": "cron:daily:2026-11-29T09:00:00+00:00",
        }
        tid = await session.receive("Summarize today's open threads.", **fire)
        first = await session.result(tid)
        again = await session.receive("Summarize today's open threads.", **fire)
        replayed = await session.result(again)
    assert tid == again == fire["turn_id"]
    assert (first.status, first.text) == (TurnStatus.COMPLETED, "Here are today's highlights.")
    assert replayed.replayed
    [opening, _reply] = await store.load_transcript("slack:T1:C-ops:daily")
    assert isinstance(opening, TriggerMessage)
    assert (opening.kind, opening.by, opening.text) == (
        "proactive",
        "cron:daily",
        "Summarize today's open threads.",
    )
    assert len(model.requests) == 1, "the same turn id fires once"
    [turn] = await store.list_turns("slack:T1:C-ops:daily")
    assert turn.input.trigger is not None
    assert turn.input.trigger.context == {"team": "T1"}


async def test_receive_refuses_malformed_answerers_and_queues_nothing(
    store: SessionStore,
) -> None:
    agent = Agent(name="a", instructions="x")
    async with _rt(store, ScriptedModel([]), agent) as rt:
        session = rt.session(agent, "p1")
        with pytest.raises(AgentError, match="answerers must be"):
            await session.receive("s", by="cron:x", answerers={"channel": "C1"})
    assert await store.list_turns("p1") == []


# per-source policies --------------------------------------------------------------------------


def _agent_dir(root: Path, *, mode: str | None, overlay: str = "Be brief in Slack.") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "instructions.md").write_text("You are the ops agent.")
    (root / "instructions.slack.md").write_text(overlay)
    surface = {"deny_tools": ["issue_refund"]}
    if mode:
        surface["mode"] = mode
    (root / "agent.py").write_text(f"name = 'ops'\nsurfaces = {{'slack': {surface!r}}}\n")
    tools = root / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "refund.py").write_text(
        "from agent import tool\n\n"
        "@tool\nasync def issue_refund(order_id: str) -> str:\n"
        '    """Refund."""\n    return order_id\n\n'
        "@tool\nasync def lookup(order_id: str) -> str:\n"
        '    """Look up."""\n    return "found " + order_id\n'
    )
    return root


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (None, "You are the ops agent.\n\nBe brief in Slack."),
        ("replace", "Be brief in Slack."),
    ],
)
async def test_overlay_or_replace_prompt_and_denied_tools(
    store: SessionStore, tmp_path: Path, mode: str | None, expected: str
) -> None:
    agent = load_agent(_agent_dir(tmp_path / "agent", mode=mode))
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[ToolCall(id="h", name="issue_refund", input={"order_id": "1"})]
            ),
            ScriptedReply(text="cannot"),
        ]
    )
    async with _rt(store, model, agent) as rt:
        await rt.session(agent, "s1").turn(slack_event("refund 1"))
        await rt.session(agent, "s2").turn("refund 1 from the API")
    slack_request, api_request = model.requests[0], model.requests[2]
    assert slack_request.system == expected
    assert [t.name for t in slack_request.tools] == ["lookup"]
    assert api_request.system == "You are the ops agent."
    assert sorted(t.name for t in api_request.tools) == ["issue_refund", "lookup"]
    denied = (await store.load_transcript("s1"))[2]
    assert denied.result == {"error": "UnknownToolError: no tool named 'issue_refund'"}
    allowed = (await store.load_transcript("s2"))[2]
    assert allowed.result == "1"


def test_mode_without_overlay_is_an_assembly_error(tmp_path: Path) -> None:
    from agent import AssemblyError

    root = _agent_dir(tmp_path / "agent", mode="replace")
    (root / "instructions.slack.md").unlink()
    with pytest.raises(AssemblyError, match=r"instructions\.slack\.md"):
        load_agent(root)


async def test_policy_is_kept_across_a_park_when_the_files_change(
    store: SessionStore, tmp_path: Path
) -> None:
    root = tmp_path / "agent"
    _agent_dir(root, mode="replace", overlay="Old Slack rules.")
    (root / "agent.py").write_text("name = 'ops'\nsurfaces = {'slack': {'mode': 'replace'}}\n")
    (root / "tools" / "ask.py").write_text(
        "from agent import tool, ToolContext\n\n"
        "@tool\nasync def ask(ctx: ToolContext) -> str:\n"
        '    """Ask."""\n'
        "    return str(await ctx.request_input(id='ok', prompt='ok?'))\n"
    )
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={})]),
            ScriptedReply(text="k"),
        ]
    )
    agent = load_agent(root)
    async with _rt(store, model, agent) as rt:
        tid = await rt.session(agent, "s1").start(slack_event("hi"), turn_id="T1")
        assert (await rt.session(agent, "s1").result(tid)).status == TurnStatus.SUSPENDED
    (root / "instructions.slack.md").write_text("New Slack rules.")
    changed = load_agent(root)
    async with _rt(store, model, changed) as rt:
        session = rt.session(changed, "s1")
        await session.resume("T1", "ok", True, by="U1")
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    assert model.requests[-1].system == "Old Slack rules."


def test_policy_for_a_source_no_channel_emits_logs_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = _agent_dir(tmp_path / "agent", mode=None)
    with caplog.at_level("WARNING", logger="agent._loader"):
        load_agent(root, emitted_sources=["email"])
    assert "'slack'" in caplog.text
    assert "no mounted channel emits it" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="agent._loader"):
        load_agent(root, emitted_sources=["slack"])
    assert caplog.text == ""
