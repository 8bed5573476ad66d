"""The engine tells its `TurnMeter` what each run of a turn did: model calls with their tokens,
how each tool call settled, how the run ended, each committed step, a lease claimed over a
lapsed owner. On SQLite and PostgreSQL; a meter that raises costs its numbers, never a turn."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from agent import (
    Agent,
    ModelError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    TurnStatus,
    Usage,
    tool,
)
from agent.seams import (
    LeaseTakeover,
    ModelRun,
    StepCommitted,
    TokenCounts,
    ToolRun,
    TurnRun,
)
from tests.bot.harness import eventually
from tests.support.confirmations import turn_and_approve
from tests.support.engine_fixtures import ORDER_AGENT


class RecordingMeter:
    """Keeps every record, as a host's meter would count them."""

    def __init__(self) -> None:
        self.turns: list[TurnRun] = []
        self.models: list[ModelRun] = []
        self.tools: list[ToolRun] = []
        self.steps: list[StepCommitted] = []
        self.takeovers: list[LeaseTakeover] = []

    def turn_ran(self, record: TurnRun) -> None:
        self.turns.append(record)

    def model_called(self, record: ModelRun) -> None:
        self.models.append(record)

    def tool_called(self, record: ToolRun) -> None:
        self.tools.append(record)

    def step_committed(self, record: StepCommitted) -> None:
        self.steps.append(record)

    def lease_taken_over(self, record: LeaseTakeover) -> None:
        self.takeovers.append(record)

    def outcomes(self) -> list[tuple[str, str]]:
        return [(r.tool, r.outcome) for r in self.tools]


def _runtime(store: SessionStore, model: Any, agent: Agent, meter: Any, **kw: Any) -> Runtime:
    kw.setdefault("recovery_interval", 0.05)
    kw.setdefault("poll_interval", 0.02)
    return Runtime(store, model, agent=agent, meter=meter, **kw)


async def test_a_turn_with_tool_calls_reports_models_tools_steps_and_its_end(
    sql_store: SessionStore,
) -> None:
    meter = RecordingMeter()
    usage = Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100, cache_write_tokens=7)
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ToolCall(id="a", name="lookup_stock", input={"item": "mug"}),
                    ToolCall(id="b", name="create_order", input={"item": "mug", "quantity": 2}),
                ],
                usage=usage,
            ),
            ScriptedReply(text="Ordered.", usage=Usage(input_tokens=200, output_tokens=4)),
        ]
    )
    async with _runtime(sql_store, model, ORDER_AGENT, meter) as rt:
        result = await rt.session(ORDER_AGENT, "s1").turn("Two mugs", turn_id="T1")
        await eventually(lambda: meter.turns, what="the run reported")

    assert result.status == TurnStatus.COMPLETED
    assert [(m.agent, m.model, m.stop_reason, m.error) for m in meter.models] == [
        ("orders", "default", "tool_use", None),
        ("orders", "default", "end_turn", None),
    ]
    assert meter.models[0].tokens == TokenCounts(
        input=120, output=30, cache_read=100, cache_write=7
    )
    assert sorted(meter.outcomes()) == [("create_order", "ok"), ("lookup_stock", "ok")]
    assert [s.kind for s in meter.steps] == ["opening", "model", "tool", "tool", "model"]
    assert all(s.seconds >= 0 for s in [*meter.steps, *meter.tools, *meter.models])
    [run] = meter.turns
    assert (run.agent, run.session_key, run.turn_id, run.outcome) == (
        "orders",
        "s1",
        "T1",
        "completed",
    )
    assert run.steps == 5
    assert run.tokens == TokenCounts(input=320, output=34, cache_read=100, cache_write=7)
    assert run.trace_id is None, "no tracer provider set up: no trace to link"
    assert run.error is None


@tool
async def flaky(item: str) -> str:
    """Fails for the model to read."""
    raise ValueError(f"no such item {item}")


async def test_a_tool_error_and_a_model_error(sql_store: SessionStore) -> None:
    meter = RecordingMeter()
    agent = Agent(name="f", instructions="x", tools=[flaky])

    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0:
            return ScriptedReply(tool_calls=[ToolCall(id="c", name="flaky", input={"item": "x"})])
        raise ModelError("overloaded")

    async with _runtime(sql_store, ScriptedModel(responder=respond), agent, meter) as rt:
        result = await rt.session(agent, "s1").turn("go")
        await eventually(lambda: meter.turns, what="the run reported")

    assert result.status == TurnStatus.FAILED
    assert meter.outcomes() == [("flaky", "error")]
    assert [m.error for m in meter.models] == [None, "ModelError"]
    assert meter.models[1].tokens == TokenCounts()
    [run] = meter.turns
    assert (run.outcome, run.error) == ("failed", "ModelError")
    assert [s.kind for s in meter.steps] == ["opening", "model", "tool", "end"]


@tool
async def ask(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Asks host code to approve (parks the turn)."""
    approved = await ctx.request_input(id="approve", prompt=f"Approve {order}?")
    return {"approved": approved}


async def test_a_park_then_its_resume_are_two_runs(sql_store: SessionStore) -> None:
    meter = RecordingMeter()
    agent = Agent(name="asks", instructions="x", tools=[ask])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={"order": "7"})]),
            ScriptedReply(text="Approved."),
        ]
    )
    async with _runtime(sql_store, model, agent, meter) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start("order 7")
        parked = await session.result(tid)
        assert parked.status == TurnStatus.SUSPENDED
        assert parked.request is not None
        await eventually(lambda: meter.turns, what="the parked run reported")
        assert [r.outcome for r in meter.turns] == ["suspended"]
        assert meter.outcomes() == [("ask", "parked")]
        assert meter.steps[-1].kind == "end"

        await session.resume(tid, parked.request.id, True)
        done = await session.result(tid)
        await eventually(lambda: len(meter.turns) == 2, what="the resumed run reported")

    assert done.status == TurnStatus.COMPLETED
    assert [(r.turn_id, r.outcome) for r in meter.turns] == [(tid, "suspended"), (tid, "completed")]
    assert meter.outcomes() == [("ask", "parked"), ("ask", "ok")]
    assert meter.turns[1].steps == 2, "the resumed run: the call's result, the last reply"


async def test_a_cancelled_turn(sql_store: SessionStore) -> None:
    meter = RecordingMeter()
    started = asyncio.Event()

    @tool
    async def wait_for_stop(ctx: ToolContext) -> str:
        """Runs until the turn is stopped."""
        started.set()
        await ctx.cancellation.wait()
        return "stopped"

    agent = Agent(name="w", instructions="x", tools=[wait_for_stop])
    model = ScriptedModel(
        [ScriptedReply(tool_calls=[ToolCall(id="w", name="wait_for_stop", input={})])]
    )
    async with _runtime(sql_store, model, agent, meter) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start("wait")
        async with asyncio.timeout(30):
            await started.wait()
        assert await session.cancel(tid)
        result = await session.result(tid)
        await eventually(lambda: meter.turns, what="the run reported")

    assert result.status == TurnStatus.CANCELLED
    assert [r.outcome for r in meter.turns] == ["cancelled"]
    assert meter.turns[0].error is None


PAID: list[str] = []


@tool(effect="write", confirmation="required")
async def pay(order: str, ctx: ToolContext) -> Any:
    """Charge (a person confirms first)."""

    async def charge(authority: Any) -> str:
        PAID.append(authority.idempotency_key)
        return "charged"

    return (await ctx.run_effect(f"charge:{order}", charge)).value


def _pay_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="p", name="pay", input={"order": "o1"})]),
            ScriptedReply(text="done"),
        ]
    )


async def test_confirmations_denials_and_a_receipt_that_answers_again(
    sql_store: SessionStore,
) -> None:
    """A proposal waits for a person (parked); a denied one never runs (denied); a write whose
    receipt already completed is answered by it (deduplicated)."""
    PAID.clear()
    meter = RecordingMeter()
    agent = Agent(name="p", instructions="x", tools=[pay])
    async with _runtime(sql_store, _pay_model(), agent, meter) as rt:
        session = rt.session(agent, "s1")
        await turn_and_approve(session, "pay o1")
        await eventually(lambda: len(meter.turns) == 2, what="both runs reported")
        assert meter.outcomes() == [("pay", "parked"), ("pay", "ok")]

        await turn_and_approve(session, "pay o1 again")
        await eventually(lambda: len(meter.turns) == 4, what="the second pair reported")
        assert meter.outcomes()[2:] == [("pay", "parked"), ("pay", "deduplicated")]
        assert len(PAID) == 1

        await session.turn("pay o1 once more")
        [pending] = [c for c in await sql_store.list_confirmations("s1") if c.status == "pending"]
        follow_up = await session.confirm(pending.confirmation_id, False)
        await session.result(follow_up)
        await eventually(lambda: len(meter.turns) == 6, what="the denial's run reported")

    # the follow-up's model (scripted by position) proposes the payment once more: parked again
    assert meter.outcomes()[4:] == [("pay", "parked"), ("pay", "denied"), ("pay", "parked")]
    assert {r.outcome for r in meter.turns} == {"completed"}


async def test_a_lease_claimed_over_a_lapsed_owner(sql_store: SessionStore) -> None:
    meter = RecordingMeter()
    agent = Agent(name="l", instructions="x")
    model = ScriptedModel([ScriptedReply(text="hi")])
    async with Runtime(sql_store, model, agent=agent, run_turns=False) as web:
        tid = await web.session(agent, "s1").start("hello")
    ghost = await sql_store.acquire_lease("s1", "ghost-worker", 0.2, time.time())
    assert ghost is not None  # a worker that died holding it: it never releases it
    await asyncio.sleep(0.3)  # not a timing assert: only makes sure the lease has lapsed
    async with _runtime(sql_store, model, agent, meter) as worker:
        result = await worker.session(agent, "s1").result(tid)
        await eventually(lambda: meter.turns, what="the run reported")

    assert result.status == TurnStatus.COMPLETED
    assert meter.takeovers == [LeaseTakeover(session_key="s1")]


class RaisingMeter(RecordingMeter):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _raise(self) -> None:
        self.calls += 1
        raise RuntimeError("the meter is broken")

    def turn_ran(self, record: TurnRun) -> None:
        self._raise()

    def model_called(self, record: ModelRun) -> None:
        self._raise()

    def tool_called(self, record: ToolRun) -> None:
        self._raise()

    def step_committed(self, record: StepCommitted) -> None:
        self._raise()


async def test_a_meter_that_raises_does_not_fail_a_turn(
    sql_store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    meter = RaisingMeter()
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="a", name="lookup_stock", input={"item": "x"})]),
            ScriptedReply(text="Done."),
        ]
    )
    with caplog.at_level(logging.ERROR, logger="agent._turn_metering"):
        async with _runtime(sql_store, model, ORDER_AGENT, meter) as rt:
            session = rt.session(ORDER_AGENT, "s1")
            first = await session.turn("one")
            second = await session.turn("two")
            await eventually(lambda: meter.calls >= 12, what="every record offered")

    assert (first.status, second.status) == (TurnStatus.COMPLETED, TurnStatus.COMPLETED)
    assert first.text == second.text == "Done."
    complaints = [r for r in caplog.records if "meter raised" in r.getMessage()]
    assert len(complaints) == 1, "logged once, not at every record"
