"""OpenTelemetry spans of turns, recorded by the SDK's in-memory exporter: an `invoke_agent` span
per run with `chat` and `execute_tool` children (GenAI attributes, token counts with cache
reads), one trace per turn derived from its ids, a park then a resume as two linked runs of that
trace, errors as `error.type`, and no content unless asked for (scrubbed when it is)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.trace import StatusCode

from agent import (
    Agent,
    ModelError,
    ModelSettings,
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
from agent._tracing import turn_trace_ids
from agent.seams import TurnRun
from tests.bot.harness import eventually
from tests.support.dying_store import DiesBeforeStep
from tests.support.engine_fixtures import ORDER_AGENT, ORDER_SCRIPT
from tests.support.spans import Spans, attrs, everything_said, trace_hex

SECRET = "xoxb-123456789012-123456789012-abcdefghijklmnopqrstuvwx"
"""A Slack bot token's shape: scrubbed without being listed."""
LISTED = "hunter2-the-database-password"
"""A secret only the runtime's `secrets` list knows."""


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    yield recorded
    recorded.close()


class TurnRuns:
    """A meter keeping only the runs, for the trace id they carry."""

    def __init__(self) -> None:
        self.runs: list[TurnRun] = []

    def turn_ran(self, record: TurnRun) -> None:
        self.runs.append(record)

    def __getattr__(self, name: str) -> Any:
        return lambda record: None


def _runtime(store: SessionStore, model: Any, agent: Agent, spans: Spans, **kw: Any) -> Runtime:
    kw.setdefault("recovery_interval", 0.05)
    kw.setdefault("poll_interval", 0.02)
    return Runtime(store, model, agent=agent, tracer_provider=spans.provider, **kw)


def _derived(session: str, turn: str) -> tuple[str, int]:
    trace_id, root = turn_trace_ids(session, turn)
    return format(trace_id, "032x"), root


async def test_a_turn_is_a_run_span_with_model_and_tool_children(
    sql_store: SessionStore, spans: Spans
) -> None:
    meter = TurnRuns()
    usage = Usage(input_tokens=120, output_tokens=30, cache_read_tokens=100, cache_write_tokens=7)
    model = ScriptedModel(
        [
            ScriptedReply(
                tool_calls=[
                    ToolCall(id="a", name="lookup_stock", input={"item": "mug"}),
                    ToolCall(id="b", name="create_order", input={"item": "mug", "quantity": 2}),
                ],
                usage=usage,
                model="claude-test-1",
            ),
            ScriptedReply(text="Ordered.", model="claude-test-1"),
        ]
    )
    async with _runtime(sql_store, model, ORDER_AGENT, spans, meter=meter) as rt:
        result = await rt.session(ORDER_AGENT, "s1").turn("Two mugs", turn_id="T1")
        await eventually(lambda: spans.runs() and meter.runs, what="the run's span ended")

    assert result.status == TurnStatus.COMPLETED
    [run] = spans.runs()
    trace_id, root = _derived("s1", "T1")
    assert trace_hex(run) == trace_id
    assert meter.runs[0].trace_id == trace_id, "a log line of the run can name its trace"
    assert run.parent is not None
    assert (run.parent.span_id, run.parent.is_remote) == (root, True)
    assert run.name == "invoke_agent orders"
    assert attrs(run) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "orders",
        "slack_agent.session.key": "s1",
        "slack_agent.turn.id": "T1",
        "slack_agent.outcome": "completed",
    }
    assert run.status.status_code == StatusCode.UNSET

    children = spans.children(run)
    assert sorted(s.name for s in children) == [
        "chat claude-test-1",
        "chat claude-test-1",
        "execute_tool create_order",
        "execute_tool lookup_stock",
    ]
    assert {trace_hex(s) for s in spans.all()} == {trace_id}
    first_chat = min(spans.named("chat"), key=lambda s: s.start_time or 0)
    assert attrs(first_chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.agent.name": "orders",
        "gen_ai.request.max_tokens": 1024,
        "gen_ai.response.model": "claude-test-1",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.usage.cache_creation.input_tokens": 7,
        "gen_ai.response.finish_reasons": ("tool_use",),
    }
    [lookup] = spans.named("execute_tool lookup_stock")
    assert attrs(lookup) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.agent.name": "orders",
        "gen_ai.tool.name": "lookup_stock",
        "gen_ai.tool.call.id": "a",
        "gen_ai.tool.type": "function",
        "slack_agent.outcome": "ok",
    }


async def test_a_model_the_agent_names_is_the_requested_one(
    sql_store: SessionStore, spans: Spans
) -> None:
    agent = Agent(name="n", instructions="x", model=ModelSettings(model="claude-named"))
    model = ScriptedModel([ScriptedReply(text="hi", model="claude-named-2026")])
    async with _runtime(sql_store, model, agent, spans) as rt:
        await rt.session(agent, "s1").turn("hello")
        await eventually(lambda: spans.runs(), what="the run's span ended")

    [chat] = spans.named("chat")
    assert chat.name == "chat claude-named"
    assert attrs(chat)["gen_ai.request.model"] == "claude-named"
    assert attrs(chat)["gen_ai.response.model"] == "claude-named-2026"
    assert attrs(chat)["gen_ai.response.finish_reasons"] == ("end_turn",)


@tool
async def ask(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Asks host code to approve (parks the turn)."""
    approved = await ctx.request_input(id="approve", prompt=f"Approve {order}?")
    return {"approved": approved}


ASK_AGENT = Agent(name="asks", instructions="x", tools=[ask])


def _ask_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={"order": "7"})]),
            ScriptedReply(text="Approved."),
        ]
    )


async def test_a_park_and_its_resume_are_two_linked_runs_of_one_trace(
    sql_store: SessionStore, spans: Spans
) -> None:
    async with _runtime(sql_store, _ask_model(), ASK_AGENT, spans) as rt:
        session = rt.session(ASK_AGENT, "s1")
        tid = await session.start("order 7")
        parked = await session.result(tid)
        assert parked.request is not None
        await eventually(lambda: spans.runs(), what="the parked run's span ended")
        await session.resume(tid, parked.request.id, True)
        done = await session.result(tid)
        await eventually(lambda: len(spans.runs()) == 2, what="the resumed run's span ended")

    assert done.status == TurnStatus.COMPLETED
    first, second = sorted(spans.runs(), key=lambda s: s.start_time or 0)
    trace_id, _ = _derived("s1", tid)
    assert trace_hex(first) == trace_hex(second) == trace_id
    assert attrs(first)["slack_agent.outcome"] == "suspended"
    assert first.status.status_code == StatusCode.UNSET, "a park is not an error"
    assert attrs(second)["slack_agent.outcome"] == "completed"
    assert [link.context for link in second.links] == [first.get_span_context()]
    parked_call, resumed_call = sorted(
        spans.named("execute_tool ask"), key=lambda s: s.start_time or 0
    )
    assert attrs(parked_call)["slack_agent.outcome"] == "parked"
    assert attrs(resumed_call)["slack_agent.outcome"] == "ok"
    assert {s.name for s in spans.children(first)} == {"chat default", "execute_tool ask"}
    assert {s.name for s in spans.children(second)} == {"chat default", "execute_tool ask"}


@tool
async def flaky(item: str) -> str:
    """Fails for the model to read."""
    raise ValueError(f"no such item {item}")


async def test_errors_set_error_type_and_the_error_status(
    sql_store: SessionStore, spans: Spans
) -> None:
    agent = Agent(name="f", instructions="x", tools=[flaky])

    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0:
            return ScriptedReply(tool_calls=[ToolCall(id="c", name="flaky", input={"item": "x"})])
        raise ModelError("overloaded")

    async with _runtime(sql_store, ScriptedModel(responder=respond), agent, spans) as rt:
        result = await rt.session(agent, "s1").turn("go")
        await eventually(lambda: spans.runs(), what="the run's span ended")

    assert result.status == TurnStatus.FAILED
    [call] = spans.named("execute_tool flaky")
    assert attrs(call)["error.type"] == "ValueError"
    assert call.status.status_code == StatusCode.ERROR
    failed_chat = max(spans.named("chat"), key=lambda s: s.start_time or 0)
    assert attrs(failed_chat)["error.type"] == "ModelError"
    assert failed_chat.status.status_code == StatusCode.ERROR
    [run] = spans.runs()
    assert (attrs(run)["slack_agent.outcome"], attrs(run)["error.type"]) == ("failed", "ModelError")
    assert run.status.status_code == StatusCode.ERROR
    assert "overloaded" not in everything_said(spans.all()), "a kind, never the error's text"


@tool
async def look_up(query: str, password: str) -> str:
    """Looks something up with a password (which must never reach a span)."""
    return f"found {query} (used {password})"


def _secret_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(
                text=f"Using {SECRET}.",
                tool_calls=[
                    ToolCall(
                        id="l",
                        name="look_up",
                        input={"query": "the private plan", "password": LISTED},
                    )
                ],
            ),
            ScriptedReply(text="Here is the private plan."),
        ]
    )


PROMPT = f"Look up the private plan with token {SECRET} and password {LISTED}"


async def test_no_content_reaches_a_span_unless_asked(
    sql_store: SessionStore, spans: Spans
) -> None:
    agent = Agent(name="c", instructions="Be discreet.", tools=[look_up])
    async with _runtime(sql_store, _secret_model(), agent, spans, secrets=[LISTED]) as rt:
        result = await rt.session(agent, "s1").turn(PROMPT)
        await eventually(lambda: spans.runs(), what="the run's span ended")

    assert result.status == TurnStatus.COMPLETED
    said = everything_said(spans.all())
    assert len(spans.all()) == 4
    for content in (SECRET, LISTED, "private plan", "Be discreet", "found"):
        assert content not in said
    assert not any(key.startswith("gen_ai.input") for s in spans.all() for key in attrs(s))


async def test_captured_content_is_scrubbed_of_secrets(
    sql_store: SessionStore, spans: Spans
) -> None:
    agent = Agent(name="c", instructions="Be discreet.", tools=[look_up])
    async with _runtime(
        sql_store, _secret_model(), agent, spans, secrets=[LISTED], capture_content=True
    ) as rt:
        result = await rt.session(agent, "s1").turn(PROMPT)
        await eventually(lambda: spans.runs(), what="the run's span ended")

    assert result.status == TurnStatus.COMPLETED
    said = everything_said(spans.all())
    assert SECRET not in said
    assert LISTED not in said
    first_chat, second_chat = sorted(spans.named("chat"), key=lambda s: s.start_time or 0)
    sent = json.loads(attrs(first_chat)["gen_ai.input.messages"])
    assert "Look up the private plan" in sent[0]["text"]
    assert "Be discreet" in attrs(first_chat)["gen_ai.system_instructions"]
    assert "Using " in attrs(first_chat)["gen_ai.output.messages"]
    [call] = spans.named("execute_tool look_up")
    assert json.loads(attrs(call)["gen_ai.tool.call.arguments"])["query"] == "the private plan"
    assert "found the private plan" in attrs(call)["gen_ai.tool.call.result"]
    assert "Here is the private plan" in attrs(second_chat)["gen_ai.output.messages"]


async def test_a_turn_interrupted_before_a_step_goes_on_in_the_same_trace(
    sql_store: SessionStore, spans: Spans
) -> None:
    """The in-process crash: the first runtime's store hangs before the tool's step; the turn
    is picked up by a second runtime once the first is torn down and its lease lapses."""
    dying = DiesBeforeStep(sql_store, "tool:")
    model = ScriptedModel(ORDER_SCRIPT)
    first = _runtime(dying, model, ORDER_AGENT, spans, lease_ttl=0.5)  # type: ignore[arg-type]
    async with first:
        tid = await first.session(ORDER_AGENT, "s1").start("Two mugs")
        async with asyncio.timeout(30):
            await dying.reached.wait()
        await first.close(grace=0)
    others = Spans()
    try:
        async with _runtime(sql_store, model, ORDER_AGENT, others, lease_ttl=0.5) as second:
            done = await second.session(ORDER_AGENT, "s1").result(tid)
            await eventually(lambda: others.runs(), what="the recovered run's span ended")
        assert done.status == TurnStatus.COMPLETED
        [interrupted] = spans.runs()
        [recovered] = others.runs()
    finally:
        others.close()
    trace_id, _ = _derived("s1", tid)
    assert trace_hex(interrupted) == trace_hex(recovered) == trace_id
    assert attrs(interrupted)["slack_agent.outcome"] == "interrupted"
    assert attrs(interrupted)["error.type"] == "CancelledError"
    assert attrs(recovered)["slack_agent.outcome"] == "completed"
