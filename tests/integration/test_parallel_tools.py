"""The calls of one model reply run side by side: the remote (`async def`) ones concurrently,
within the turn's bound and each tool's own, the local (`def`) ones in call order; the model and
the transcript read the results in call order whatever order they finished in; a Stop reaches
every running call and starts none; a call that asks a person parks the turn once its siblings
have finished. On every store: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    Agent,
    AssemblyError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    tool,
)
from agent.seams import SessionStore

WAIT = 30.0
"""Seconds a call waits for its siblings before the test calls it serial: generous, since the
machine may be busy; a concurrent batch meets in milliseconds."""


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, **kw: Any) -> Runtime:
    kw.setdefault("tool_concurrency", 4)
    return Runtime(store, model, agent=agent, recovery_interval=0.05, poll_interval=0.02, **kw)


def _batch(name: str, *inputs: dict[str, Any]) -> ScriptedModel:
    calls = [ToolCall(id=f"c{n}", name=name, input=i) for n, i in enumerate(inputs, 1)]
    return ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])


async def test_a_batchs_async_calls_run_side_by_side_and_the_model_reads_them_in_call_order(
    store: SessionStore,
) -> None:
    """Each call waits until all three have started, then they finish in reverse call order:
    run one after another, the first would wait for the others for ever."""
    started: set[str] = set()
    everyone = asyncio.Event()
    finished: list[str] = []
    turns = {"a": asyncio.Event(), "b": asyncio.Event(), "c": asyncio.Event()}

    @tool
    async def lookup(key: str, after: str | None = None) -> str:
        """Looks a key up."""
        started.add(key)
        if len(started) == 3:
            everyone.set()
        async with asyncio.timeout(WAIT):
            await everyone.wait()
            if after is not None:
                await turns[after].wait()
        finished.append(key)
        turns[key].set()
        return f"value of {key}"

    agent = Agent(name="a", instructions="x", tools=[lookup])
    model = _batch("lookup", {"key": "a", "after": "b"}, {"key": "b", "after": "c"}, {"key": "c"})
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        result = await session.turn("look them up")
        transcript = await session.transcript()

    assert result.status == TurnStatus.COMPLETED, result
    assert finished == ["c", "b", "a"]
    in_order = ["value of a", "value of b", "value of c"]
    assert [m.result for m in transcript if isinstance(m, ToolMessage)] == in_order
    second = model.requests[1].messages
    assert [m.result for m in second if isinstance(m, ToolMessage)] == in_order
    stored = await store.load_transcript("s1")
    assert [m.result for m in stored if isinstance(m, ToolMessage)] == in_order[::-1], (
        "stored in the order they finished, each committed as it did"
    )


async def test_the_turns_bound_and_a_tools_own_bound_cap_the_calls_running_at_once(
    store: SessionStore,
) -> None:
    running: dict[str, int] = {"wide": 0, "narrow": 0, "all": 0}
    most: dict[str, int] = {"wide": 0, "narrow": 0, "all": 0}

    async def occupy(name: str) -> str:
        for key in (name, "all"):
            running[key] += 1
            most[key] = max(most[key], running[key])
        await asyncio.sleep(0.05)
        for key in (name, "all"):
            running[key] -= 1
        return "ok"

    @tool
    async def wide(n: int) -> str:
        """Any number at once."""
        return await occupy("wide")

    @tool(concurrency=1)
    async def narrow(n: int) -> str:
        """Must not overlap itself."""
        return await occupy("narrow")

    agent = Agent(name="a", instructions="x", tools=[wide, narrow])
    calls = [ToolCall(id=f"w{n}", name="wide", input={"n": n}) for n in range(5)]
    calls += [ToolCall(id=f"n{n}", name="narrow", input={"n": n}) for n in range(3)]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])
    async with _runtime(store, agent, model, tool_concurrency=3) as rt:
        result = await rt.session(agent, "s1").turn("go")

    assert result.status == TurnStatus.COMPLETED
    assert most["narrow"] == 1, "a tool declared concurrency=1 overlapped itself"
    assert most["all"] <= 3, f"more calls ran at once than the turn's bound: {most}"
    assert most["all"] > 1, f"the batch ran one call at a time: {most}"


async def test_local_calls_run_one_at_a_time_in_call_order_beside_remote_ones(
    store: SessionStore,
) -> None:
    order: list[str] = []
    remote_running = asyncio.Event()
    release = asyncio.Event()

    @tool
    async def slow() -> str:
        """Runs until the local calls have run."""
        remote_running.set()
        async with asyncio.timeout(WAIT):
            await release.wait()
        return "slow done"

    @tool
    def note(text: str) -> str:
        """Writes a note (local)."""
        order.append(text)
        if len(order) == 3:
            release.set()
        return text

    agent = Agent(name="a", instructions="x", tools=[slow, note])
    calls = [ToolCall(id="s", name="slow", input={})]
    calls += [ToolCall(id=f"n{n}", name="note", input={"text": t}) for n, t in enumerate("abc")]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])
    async with _runtime(store, agent, model) as rt:
        result = await rt.session(agent, "s1").turn("go")

    assert result.status == TurnStatus.COMPLETED
    assert remote_running.is_set()
    assert order == ["a", "b", "c"]


async def test_a_stop_reaches_every_running_call_and_starts_none_of_the_rest(
    store: SessionStore,
) -> None:
    """Two calls run (the turn's bound is 2), a third waits for a place: Stop reaches the two
    through the turn's signal, they end early and keep their results; the third never starts
    and gets `{"cancelled": true}`."""
    entered: list[str] = []
    both = asyncio.Event()

    @tool
    async def watch(name: str, ctx: ToolContext) -> str:
        """Runs until the turn is stopped."""
        entered.append(name)
        if len(entered) == 2:
            both.set()
        async with asyncio.timeout(WAIT):
            await ctx.cancellation.wait()
        return f"{name} stopped early"

    agent = Agent(name="a", instructions="x", tools=[watch])
    model = _batch("watch", {"name": "one"}, {"name": "two"}, {"name": "three"})
    async with _runtime(store, agent, model, tool_concurrency=2) as rt:
        session = rt.session(agent, "s1")
        turn = await session.start("go", turn_id="t1")
        async with asyncio.timeout(WAIT):
            await both.wait()
        assert await session.stop(by="U1", reason="stop button") == ["t1"]
        result = await session.result(turn)
        transcript = await session.transcript()

    assert (result.status, result.reason) == (TurnStatus.CANCELLED, "stop button")
    assert entered == ["one", "two"], "the third call started after the stop"
    assert [m.result for m in transcript if isinstance(m, ToolMessage)] == [
        "one stopped early",
        "two stopped early",
        {"cancelled": True},
    ]


async def test_a_call_that_asks_parks_the_turn_after_its_siblings_finish_and_only_it_reruns(
    store: SessionStore,
) -> None:
    runs: list[str] = []

    @tool
    async def fetch(item: str) -> str:
        """Fetches an item."""
        runs.append(f"fetch {item}")
        await asyncio.sleep(0.05)
        return f"{item} fetched"

    @tool
    async def ask(ctx: ToolContext) -> Any:
        """Asks a person which one."""
        runs.append("ask")
        return await ctx.request_input(id="which", prompt="Which one?", answerers={"user": "U1"})

    agent = Agent(name="a", instructions="x", tools=[fetch, ask])
    calls = [
        ToolCall(id="f1", name="fetch", input={"item": "a"}),
        ToolCall(id="q", name="ask", input={}),
        ToolCall(id="f2", name="fetch", input={"item": "b"}),
    ]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        parked = await session.result(await session.start("go", turn_id="T1"))
        assert parked.status == TurnStatus.SUSPENDED
        assert parked.request is not None
        stored = await store.load_transcript("s1")
        assert sorted(m.call_id for m in stored if isinstance(m, ToolMessage)) == ["f1", "f2"]
        await session.resume("T1", parked.request.id, "the red one", by="U1")
        done = await session.result("T1")
        transcript = await session.transcript()

    assert done.status == TurnStatus.COMPLETED
    assert sorted(runs) == ["ask", "ask", "fetch a", "fetch b"], "a finished sibling ran again"
    assert [m.result for m in transcript if isinstance(m, ToolMessage)] == [
        "a fetched",
        "the red one",
        "b fetched",
    ]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_a_tool_concurrency_below_one_is_refused_when_declared(bad: Any) -> None:
    async def f() -> None:
        """A tool."""

    with pytest.raises(AssemblyError, match="concurrency"):
        tool(concurrency=bad)(f)
