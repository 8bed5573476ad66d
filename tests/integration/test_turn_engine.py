"""The turn loop against every store: exact transcript, steps and events; tool failures; the
local tool's transaction; ordering and concurrency; the lease fence."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import Connection, text

from agent import (
    Agent,
    AssistantMessage,
    FatalToolError,
    RecordingSink,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    UserMessage,
    tool,
)
from tests.support.engine_fixtures import ORDER_AGENT, ORDER_SCRIPT, HookedStore
from tests.support.loop_watch import LoopWatch


def _runtime(store: SessionStore, model: ScriptedModel, agent: Agent, **kw: Any) -> Runtime:
    kw.setdefault("recovery_interval", 0.05)
    kw.setdefault("poll_interval", 0.02)
    return Runtime(store, model, agent=agent, **kw)


async def test_two_tool_batch_transcript_steps_and_events_exact(store: SessionStore) -> None:
    if type(store).__name__ == "MemoryStore":
        agent = Agent(name="o", instructions="x", tools=[ORDER_AGENT.tools[0]])
        script = [
            ScriptedReply(
                text="Let me check.",
                tool_calls=[
                    ToolCall(id="a", name="lookup_stock", input={"item": "mug"}),
                    ToolCall(id="b", name="lookup_stock", input={"item": "cup"}),
                ],
            ),
            ScriptedReply(text="Ordered 2 mugs."),
        ]
    else:
        agent, script = ORDER_AGENT, ORDER_SCRIPT
    sink = RecordingSink()
    async with _runtime(store, ScriptedModel(script), agent, sink=sink) as rt:
        result = await rt.session(agent, "s1").turn("Order two mugs.", turn_id="T1")

    assert result.status == TurnStatus.COMPLETED
    assert result.text == "Ordered 2 mugs."
    assert result.replayed is False
    assert result.usage.input_tokens == 20
    transcript = await store.load_transcript("s1")
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "tool", "assistant"]
    assert all(m.turn_id == "T1" for m in transcript)
    first = transcript[1]
    assert isinstance(first, AssistantMessage)
    assert [c.id for c in first.tool_calls] == ["a", "b"]
    assert [m.call_id for m in transcript if isinstance(m, ToolMessage)] == ["a", "b"]
    steps = await store.load_steps("s1", "T1")
    assert list(steps) == ["model:1", "tool:1:a", "tool:1:b", "model:4"]
    durable = await store.read_events("s1")
    assert [(e.seq, e.type) for e in durable] == [
        (1, "turn.started"),
        (2, "message.completed"),
        (3, "action.requested"),
        (4, "action.requested"),
        (5, "action.completed"),
        (6, "action.completed"),
        (7, "message.completed"),
        (8, "turn.completed"),
    ]
    # live: the same durable events in order, plus deltas that are never stored
    live = [e for e in sink.events if e.type != "message.delta"]
    assert [(e.seq, e.type) for e in live] == [(e.seq, e.type) for e in durable]
    deltas = [e.text for e in sink.events if e.type == "message.delta"]
    assert "".join(deltas) == "Let me check.Ordered 2 mugs."


async def test_redelivering_a_completed_turn_replays_its_result_and_runs_nothing(
    store: SessionStore,
) -> None:
    model = ScriptedModel([ScriptedReply(text="hello")])
    agent = Agent(name="a", instructions="x")
    async with _runtime(store, model, agent) as rt:
        session = rt.session(agent, "s1")
        first = await session.turn("hi", turn_id="T1")
        again = await session.turn("hi", turn_id="T1")
        assert await session.start("hi", turn_id="T1") == "T1"
        await asyncio.sleep(0.1)
    assert (first.replayed, again.replayed) == (False, True)
    assert again.text == first.text == "hello"
    assert len(model.requests) == 1
    assert [m.role for m in await store.load_transcript("s1")] == ["user", "assistant"]


async def test_a_committed_turn_id_comes_back_replayed_through_start_and_result(
    store: SessionStore,
) -> None:
    model = ScriptedModel([ScriptedReply(text="hello")])
    agent = Agent(name="a", instructions="x")
    async with _runtime(store, model, agent) as rt:
        session = rt.session(agent, "s1")
        first = await session.result(await session.start("hi", turn_id="T1"))
        again = await session.result(await session.start("hi", turn_id="T1"))
        # another handle on the session, as a second Slack retry would get
        elsewhere = rt.session(agent, "s1")
        third = await elsewhere.result(await elsewhere.start("hi", turn_id="T1"))
        via_turn = await session.turn("hi", turn_id="T1")
    assert first.replayed is False, "the delivery that ran the turn is not a replay"
    assert (again.replayed, third.replayed, via_turn.replayed) == (True, True, True)
    assert again.text == third.text == via_turn.text == first.text == "hello"
    assert len(model.requests) == 1


async def test_cached_model_step_emits_no_delta_on_replay(store: SessionStore) -> None:
    """The database goes away right before the tool step commits; a replay later must not
    stream the already-committed model reply again."""
    broken = {"on": True}

    tried = asyncio.Event()

    def hook(stage: str, label: str) -> None:
        if broken["on"] and stage == "before" and label == "tool:1:a":
            tried.set()
            raise ConnectionError("database went away")

    @tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    agent = Agent(name="a", instructions="x", tools=[noop])
    script = [
        ScriptedReply(
            text=["first ", "reply"], tool_calls=[ToolCall(id="a", name="noop", input={})]
        ),
        ScriptedReply(text=["second"]),
    ]
    model = ScriptedModel(script)
    hooked = HookedStore(store, hook)
    rt1 = _runtime(hooked, model, agent)  # type: ignore[arg-type]
    session = rt1.session(agent, "s1")
    await session.start("go", turn_id="T1")
    async with asyncio.timeout(5):
        await tried.wait()
    await asyncio.sleep(0.1)  # a few more failed attempts at the tool step
    await rt1.close()
    assert len(model.requests) == 1

    broken["on"] = False
    sink = RecordingSink()
    async with _runtime(store, model, agent, sink=sink) as rt2:
        result = await rt2.session(agent, "s1").turn("go", turn_id="T1")
    assert result.status == TurnStatus.COMPLETED
    assert [e.text for e in sink.events if e.type == "message.delta"] == ["second"]
    assert len(model.requests) == 2
    assert [m.role for m in await store.load_transcript("s1")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]


@tool
def failing_order(item: str, ctx: ToolContext) -> dict[str, Any]:
    """Writes, then fails: the write must vanish with the rolled-back step."""
    conn: Connection = ctx.store.unwrap()
    conn.execute(text("create table if not exists rollback_probe (item text)"))
    conn.execute(text("insert into rollback_probe (item) values (:i)"), {"i": item})
    raise ValueError("warehouse is closed")


@tool
def fatal_tool() -> str:
    """A broken deployment."""
    raise FatalToolError("misconfigured warehouse")


async def test_local_tool_error_rolls_back_and_model_reads_it(sql_store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[failing_order])
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[ToolCall(id="c1", name="failing_order", input={"item": "x"})]
            ),
            ScriptedReply(text="The warehouse is closed."),
        ]
    )
    async with _runtime(sql_store, model, agent) as rt:
        result = await rt.session(agent, "s1").turn("order x")
    assert result.status == TurnStatus.COMPLETED
    tool_message = (await sql_store.load_transcript("s1"))[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.is_error
    assert tool_message.result == {"error": "ValueError: warehouse is closed"}
    # the model's second request carried the error
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    assert sent.result == {"error": "ValueError: warehouse is closed"}
    tables = await sql_store.run_sync(lambda c: c.dialect.has_table(c, "rollback_probe"))  # type: ignore[attr-defined]
    assert not tables, "the local tool's DDL and insert were rolled back with the step"


async def test_a_sync_tool_sleeping_a_second_leaves_the_event_loop_free(
    store: SessionStore,
) -> None:
    """A local tool runs inside its step's transaction, and that transaction runs on a worker
    thread, never on the loop: while the tool sleeps, acks, lease heartbeats and renderers go on.
    (On PostgreSQL the body once ran on the loop through `run_sync`: the loop stalled 1.01 s.)"""

    @tool
    def slow_lookup() -> str:
        """Takes a second, as a slow sync client would."""
        time.sleep(1.0)
        return "found"

    agent = Agent(name="a", instructions="x", tools=[slow_lookup])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c", name="slow_lookup", input={})]),
            ScriptedReply(text="done"),
        ]
    )
    # the loop's lag, measured all through the turn (time the OS gave the CPU to others excused)
    watch = LoopWatch(asyncio.get_running_loop(), threshold=0.1)
    async with _runtime(store, model, agent) as rt:
        watch.start()
        try:
            result = await rt.session(agent, "s1").turn("look it up")
        finally:
            blocks = watch.stop()
    assert result.status == TurnStatus.COMPLETED
    assert not blocks, blocks[0].describe()
    assert watch.pings >= 5, "the loop was measured while the tool slept"
    tool_message = (await store.load_transcript("s1"))[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.result == "found"


async def test_fatal_tool_error_fails_the_turn(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[fatal_tool])
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ToolCall(id="c", name="fatal_tool", input={})])]
    )
    sink = RecordingSink()
    async with _runtime(store, model, agent, sink=sink) as rt:
        result = await rt.session(agent, "s1").turn("go")
    assert result.status == TurnStatus.FAILED
    assert result.error == "FatalToolError: misconfigured warehouse"
    assert sink.types()[-1] == "turn.failed"
    assert (await store.read_events("s1"))[-1].type == "turn.failed"


async def test_memory_store_has_no_handle_so_a_store_tool_fails_the_turn() -> None:
    from storage import MemoryStore

    store = MemoryStore()
    agent = ORDER_AGENT
    model = ScriptedModel(ORDER_SCRIPT)
    async with _runtime(store, model, agent) as rt:
        result = await rt.session(agent, "s1").turn("order")
    assert result.status == TurnStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("FatalToolError:")
    assert "no transactional store handle" in result.error


async def test_tool_input_failing_schema_is_reported_to_the_model(store: SessionStore) -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent = Agent(name="a", instructions="x", tools=[add])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c", name="add", input={"a": "one", "b": 2})]),
            ScriptedReply(tool_calls=[ToolCall(id="d", name="nope", input={})]),
            ScriptedReply(text="sorry"),
        ]
    )
    async with _runtime(store, model, agent) as rt:
        result = await rt.session(agent, "s1").turn("add")
    assert result.status == TurnStatus.COMPLETED
    results = [m for m in await store.load_transcript("s1") if isinstance(m, ToolMessage)]
    assert results[0].is_error
    assert results[0].result["error"].startswith("ValidationError: invalid tool input: a:")
    assert results[1].result == {"error": "UnknownToolError: no tool named 'nope'"}


async def test_def_tool_returning_awaitable_is_a_clear_error(store: SessionStore) -> None:
    async def later() -> str:
        return "x"

    @tool
    def sneaky() -> Any:
        """Returns a coroutine by mistake."""
        return later()

    agent = Agent(name="a", instructions="x", tools=[sneaky])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c", name="sneaky", input={})]),
            ScriptedReply(text="k"),
        ]
    )
    async with _runtime(store, model, agent) as rt:
        await rt.session(agent, "s1").turn("go")
    message = (await store.load_transcript("s1"))[2]
    assert isinstance(message, ToolMessage)
    assert "declare it `async def`" in message.result["error"]
    assert message.result["error"].startswith("TypeError: tool 'sneaky' is declared with `def`")


async def test_tool_error_is_cut_and_carries_no_stack(store: SessionStore) -> None:
    @tool
    async def loud() -> str:
        """Fails at length."""
        raise RuntimeError("x" * 5000)

    agent = Agent(name="a", instructions="x", tools=[loud])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c", name="loud", input={})]),
            ScriptedReply(text="k"),
        ]
    )
    async with _runtime(store, model, agent) as rt:
        await rt.session(agent, "s1").turn("go")
    message = (await store.load_transcript("s1"))[2]
    assert isinstance(message, ToolMessage)
    error = message.result["error"]
    assert len(error) == 2000
    assert error.startswith("RuntimeError: xxx")
    assert "Traceback" not in error


@pytest.mark.parametrize("stop", ["max_tokens", "content_filter", "some_new_reason"])
async def test_abnormal_empty_stop_fails_before_commit(store: SessionStore, stop: str) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel([ScriptedReply(text="", stop_reason=stop)])
    async with _runtime(store, model, agent) as rt:
        result = await rt.session(agent, "s1").turn("go")
    assert result.status == TurnStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("AbnormalStopError:")
    assert stop in result.error
    assert [m.role for m in await store.load_transcript("s1")] == ["user"]
    assert await store.load_steps("s1", (await store.list_turns("s1"))[0].turn_id) == {}


@pytest.mark.parametrize(
    "stop", ["max_tokens", "model_context_window_exceeded", "pause_turn", "some_new_reason"]
)
async def test_tool_calls_of_an_abnormal_stop_are_never_run(store: SessionStore, stop: str) -> None:
    ran: list[dict[str, Any]] = []

    @tool
    async def refund(order: str, amount_cents: int) -> str:
        """Refund part of an order."""
        ran.append({"order": order, "amount_cents": amount_cents})
        return "ok"

    agent = Agent(name="a", instructions="x", tools=[refund])
    cut = ScriptedReply(
        text="Refunding.",
        tool_calls=[("c1", "refund", {"order": "A-1", "amount_cents": 100})],
        stop_reason=stop,
    )
    sink = RecordingSink()
    async with _runtime(store, ScriptedModel([cut]), agent, sink=sink) as rt:
        result = await rt.session(agent, "s1").turn("refund A-1")

    assert ran == []
    assert result.status == TurnStatus.FAILED
    assert result.error is not None
    assert result.error.startswith("AbnormalStopError:")
    assert stop in result.error
    assert "refund" in result.error
    assert [m.role for m in await store.load_transcript("s1")] == ["user"]
    assert "action.requested" not in sink.types()


async def test_abnormal_stop_with_content_commits(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel([ScriptedReply(text="partial answer", stop_reason="max_tokens")])
    async with _runtime(store, model, agent) as rt:
        result = await rt.session(agent, "s1").turn("go")
    assert result.status == TurnStatus.COMPLETED
    assert result.text == "partial answer"


async def test_sessions_run_concurrently_and_turns_of_one_session_in_order(
    store: SessionStore,
) -> None:
    both_running = asyncio.Barrier(2)
    order: list[str] = []

    @tool
    async def meet(name: str) -> str:
        """Waits until the other session's tool runs too: only possible concurrently."""
        order.append(f"start:{name}")
        async with asyncio.timeout(5):
            await both_running.wait()
        order.append(f"end:{name}")
        return name

    agent = Agent(name="a", instructions="x", tools=[meet])

    def responder(request: Any, step: int) -> ScriptedReply:
        text = request.messages[-1].text if step == 0 else ""
        if step == 0:
            return ScriptedReply(tool_calls=[ToolCall(id="m", name="meet", input={"name": text})])
        return ScriptedReply(text="met")

    async with _runtime(store, ScriptedModel(responder=responder), agent) as rt:
        a, b = rt.session(agent, "A"), rt.session(agent, "B")
        ta = await a.start("alpha")
        tb = await b.start("beta")
        ra, rb = await asyncio.gather(a.result(ta), b.result(tb))
    assert ra.status == rb.status == TurnStatus.COMPLETED

    seen: list[str] = []

    @tool
    async def note(label: str) -> str:
        """Records the order turns ran in."""
        seen.append(label)
        await asyncio.sleep(0.01)
        return label

    agent2 = Agent(name="b", instructions="x", tools=[note])

    def responder2(request: Any, step: int) -> ScriptedReply:
        if step == 0:
            label = request.messages[-1].text
            return ScriptedReply(tool_calls=[ToolCall(id="n", name="note", input={"label": label})])
        return ScriptedReply(text="ok")

    async with _runtime(store, ScriptedModel(responder=responder2), agent2) as rt:
        s = rt.session(agent2, "C")
        ids = [await s.start(f"turn{i}") for i in range(4)]
        results = [await s.result(t) for t in ids]
    assert all(r.status == TurnStatus.COMPLETED for r in results)
    assert seen == ["turn0", "turn1", "turn2", "turn3"]
    openings = [m for m in await store.load_transcript("C") if isinstance(m, UserMessage)]
    assert [m.text for m in openings] == ["turn0", "turn1", "turn2", "turn3"]


async def test_stale_lease_holder_cannot_commit(store: SessionStore) -> None:
    """Worker A pauses inside a tool past its lease; B takes over and finishes the turn; when A
    wakes, its commit is refused and nothing is written twice."""
    release_a = asyncio.Event()
    entered = asyncio.Event()
    calls: list[str] = []

    @tool
    async def slow(ctx: ToolContext) -> str:
        """First caller pauses until released."""
        calls.append("run")
        entered.set()
        if len(calls) == 1:
            await release_a.wait()
        return "done"

    agent = Agent(name="a", instructions="x", tools=[slow])
    script = [
        ScriptedReply(tool_calls=[ToolCall(id="s", name="slow", input={})]),
        ScriptedReply(text="finished"),
    ]
    worker_a = _runtime(
        store, ScriptedModel(script), agent, owner="A", lease_ttl=0.3, heartbeat_interval=1000
    )
    session_a = worker_a.session(agent, "s1")
    await session_a.start("go", turn_id="T1")
    await entered.wait()
    await asyncio.sleep(0.4)  # A's lease has expired while it is "paused"

    async with _runtime(store, ScriptedModel(script), agent, owner="B", lease_ttl=5) as worker_b:
        result = await worker_b.session(agent, "s1").result("T1")
        assert result.status == TurnStatus.COMPLETED
        release_a.set()
        await asyncio.sleep(0.2)
    await worker_a.close()
    assert calls == ["run", "run"]  # remote tools are at-least-once; commits are not
    transcript = await store.load_transcript("s1")
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
    assert list(await store.load_steps("s1", "T1")) == ["model:1", "tool:1:s", "model:3"]


async def test_a_long_running_runtime_keeps_nothing_per_finished_session(
    store: SessionStore,
) -> None:
    """A worker sees every session once: what it keeps per session after the turns are done
    must not grow with their number (it grew the heap, and the collector's pauses with it)."""
    agent = Agent(name="plain", instructions="x")
    model = ScriptedModel([ScriptedReply(text="ok")])
    async with _runtime(store, model, agent) as rt:
        for n in range(5):
            result = await rt.session(agent, f"s{n}").turn("hi", turn_id=f"T{n}")
            assert result.status == TurnStatus.COMPLETED

        for _ in range(500):  # a drain is forgotten once its task has finished
            if not rt._drains:
                break
            await asyncio.sleep(0.01)
        assert rt._drains == {}
        assert rt._agents == {}
        other = Agent(name="other", instructions="y")
        rt.session(other, "s-other")
        assert rt.agent_for("s-other") is other  # an agent other than the default is kept
        assert rt.agent_for("s0") is agent
