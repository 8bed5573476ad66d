"""One trace per turn across processes: a worker SIGKILLed mid-turn (its spans exported over
OTLP/HTTP to a local receiver) and the turn recovered by another runtime, and a turn queued by a
web runtime, run by a worker reached over Redis, parked, answered on the web side and resumed by
the worker. No trace context is passed: every run derives it from the session key and turn id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from redis.asyncio import Redis

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    TurnStatus,
    tool,
)
from agent._tracing import turn_trace_ids
from bot.core.asgi_server import BackgroundServer
from storage import SqlStore
from storage.redis.dispatch import RedisDispatcher
from tests.bot.harness import eventually
from tests.support import children
from tests.support.engine_fixtures import ORDER_AGENT, ORDER_SCRIPT
from tests.support.spans import OtlpReceiver, Spans, attrs, trace_hex

WITHIN = 60.0


@pytest.fixture
def spans() -> Iterator[Spans]:
    recorded = Spans()
    yield recorded
    recorded.close()


def _derived(session: str, turn: str) -> str:
    return format(turn_trace_ids(session, turn)[0], "032x")


async def test_a_turn_whose_worker_was_killed_goes_on_in_the_same_trace(
    sql_url: str, spans: Spans
) -> None:
    receiver = OtlpReceiver()
    with BackgroundServer(receiver.app) as collector:
        env = {
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{collector.url}/v1/traces",
            "OTEL_BSP_SCHEDULE_DELAY": "20",
            "OTEL_SERVICE_NAME": "crash-child",
        }
        proc = await children.start(
            "tests.support.spans", sql_url, "crash:s", "T1", "--crash", "before:tool:1:a", env=env
        )
        try:
            await children.wait_line(proc, "AT ")
            await eventually(lambda: receiver.named("chat"), within=WITHIN, what="span exported")
        finally:
            await children.kill(proc)
    [exported] = receiver.named("chat")
    assert exported.attributes["gen_ai.operation.name"] == "chat"
    assert not receiver.named("invoke_agent"), "the killed run's span never ended"

    store = await SqlStore.open(sql_url)
    try:
        runtime = Runtime(
            store,
            ScriptedModel(ORDER_SCRIPT),
            agent=ORDER_AGENT,
            tracer_provider=spans.provider,
            lease_ttl=0.6,
            recovery_interval=0.1,
            poll_interval=0.05,
        )
        async with runtime:
            result = await runtime.session(ORDER_AGENT, "crash:s").result("T1")
            await eventually(lambda: spans.runs(), within=WITHIN, what="the recovered run ended")
    finally:
        await store.close()

    assert result.status == TurnStatus.COMPLETED
    [recovered] = spans.runs()
    assert exported.trace_id == trace_hex(recovered) == _derived("crash:s", "T1")
    assert attrs(recovered)["slack_agent.outcome"] == "completed"


@tool
async def ask(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Asks a person to approve (parks the turn)."""
    approved = await ctx.request_input(id="approve", prompt=f"Approve {order}?")
    return {"approved": approved}


ASK_AGENT = Agent(name="asks", instructions="x", tools=[ask])


@pytest.fixture
async def names(redis_url: str, redis_prefix: str) -> AsyncIterator[dict[str, str]]:
    """This test's own stream, group and channel on the shared Redis, deleted afterwards."""
    chosen = {
        "stream": f"{redis_prefix}:turns",
        "group": f"{redis_prefix}:workers",
        "channel": f"{redis_prefix}:cancel",
    }
    yield chosen
    client = Redis.from_url(redis_url)
    try:
        await client.delete(chosen["stream"])
    finally:
        await client.aclose()


@pytest.mark.redis
async def test_a_turn_handed_from_web_to_worker_parks_and_resumes_in_one_trace(
    sql_url: str, redis_url: str, names: dict[str, str], spans: Spans
) -> None:
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={"order": "7"})]),
            ScriptedReply(text="Approved."),
        ]
    )
    web_spans = Spans()
    web_store, worker_store = await SqlStore.open(sql_url), await SqlStore.open(sql_url)
    web_dispatch = RedisDispatcher(redis_url, **names)
    worker_dispatch = RedisDispatcher(redis_url, **names)
    worker = Runtime(
        worker_store,
        model,
        agent=ASK_AGENT,
        tracer_provider=spans.provider,
        recovery_interval=3600.0,
        poll_interval=0.02,
    )
    web = Runtime(
        web_store,
        ScriptedModel([]),
        agent=ASK_AGENT,
        run_turns=False,
        tracer_provider=web_spans.provider,
        poll_interval=0.02,
    )
    serving: asyncio.Task[None] | None = None
    try:
        worker.attach(worker_dispatch)
        serving = asyncio.create_task(worker_dispatch.serve(worker))
        async with asyncio.timeout(WITHIN):
            await worker_dispatch.wait_ready()
        web.attach(web_dispatch)
        session = web.session(ASK_AGENT, "s1")
        async with asyncio.timeout(WITHIN):
            tid = await session.start("order 7")
            parked = await session.result(tid)
            assert parked.status == TurnStatus.SUSPENDED
            assert parked.request is not None
            await session.resume(tid, parked.request.id, True)
            done = await session.result(tid)
        await eventually(lambda: len(spans.runs()) == 2, within=WITHIN, what="both runs ended")
    finally:
        await web.close()
        await web_dispatch.close()
        await worker_dispatch.close()
        if serving is not None:
            await serving
        await worker.close()
        await web_store.close()
        await worker_store.close()
        web_spans.close()

    assert done.status == TurnStatus.COMPLETED
    assert web_spans.all() == [], "the web process queued and answered: it ran nothing"
    parked_run, resumed_run = sorted(spans.runs(), key=lambda s: s.start_time or 0)
    assert trace_hex(parked_run) == trace_hex(resumed_run) == _derived("s1", tid)
    assert [attrs(r)["slack_agent.outcome"] for r in (parked_run, resumed_run)] == [
        "suspended",
        "completed",
    ]
    assert [link.context for link in resumed_run.links] == [parked_run.get_span_context()]
