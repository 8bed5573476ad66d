"""Whole turns through the real `anthropic` SDK against the Messages API stand-in, on every store.

The unit tests of the adapter check what one model call sends and reads back; these check what
the engine then does with a reply, where the answer is a side effect in the world (a tool ran, or
did not) rather than a value.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from anthropic import AsyncAnthropic

from agent import (
    Agent,
    AnthropicModel,
    ModelSettings,
    RecordingSink,
    Runtime,
    SessionStore,
    TurnResult,
    TurnStatus,
    tool,
)
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse, sse_reply

REFUND = {"order": "A-1", "amount_cents": 100000}
# Cut where the SDK's lenient JSON parse still yields a whole-looking input, with a wrong amount:
# the first 36 characters of the JSON are `{"order": "A-1", "amount_cents": 100`.
CUT_REFUND = ToolUse("tu_1", "refund", REFUND, chunk_size=36)


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    # Made off the loop: the SDK's first client imports its HTTP stack (100+ ms on a busy box).
    client = await asyncio.to_thread(
        AsyncAnthropic, base_url=api.base_url, api_key="sk-ant-test-turns", max_retries=0
    )
    yield client
    await client.close()


def refund_agent(refunds: list[tuple[str, int]], *, max_tokens: int | None = None) -> Agent:
    @tool
    async def refund(order: str, amount_cents: int) -> dict[str, object]:
        """Refund part of an order."""
        refunds.append((order, amount_cents))
        return {"refunded": amount_cents}

    model = ModelSettings() if max_tokens is None else ModelSettings(max_tokens=max_tokens)
    return Agent(name="refunds", instructions="Refund when asked.", tools=[refund], model=model)


async def run_turn(
    store: SessionStore, client: AsyncAnthropic, agent: Agent, sink: RecordingSink
) -> TurnResult:
    model = AnthropicModel(client=client, max_tokens=2048, restart_delay=0)
    async with Runtime(store, model, agent=agent, sink=sink, poll_interval=0.02) as runtime:
        return await runtime.session(agent, "s1").turn("Refund order A-1 in full.")


@pytest.mark.parametrize(
    ("agent_max_tokens", "limit", "where"),
    [(None, 2048, "ANTHROPIC_MAX_TOKENS"), (512, 512, "the agent's model settings")],
)
async def test_a_tool_call_cut_off_at_max_tokens_is_never_run(
    store: SessionStore,
    api: AnthropicStandin,
    client: AsyncAnthropic,
    agent_max_tokens: int | None,
    limit: int,
    where: str,
) -> None:
    refunds: list[tuple[str, int]] = []
    agent = refund_agent(refunds, max_tokens=agent_max_tokens)
    sink = RecordingSink()
    api.enqueue(sse_reply(Text("Refunding."), CUT_REFUND, max_tokens_after=2))

    result = await run_turn(store, client, agent, sink)

    assert refunds == []
    assert result.status == TurnStatus.FAILED
    error = result.error or ""
    assert error.startswith("AbnormalStopError: the model's reply was cut off at max_tokens")
    assert f"max_tokens ({limit})" in error
    assert where in error
    assert len(api.requests) == 1
    assert api.bodies[0]["max_tokens"] == limit
    assert [m.role for m in await store.load_transcript("s1")] == ["user"]
    (turn,) = await store.list_turns("s1")
    assert await store.load_steps("s1", turn.turn_id) == {}
    assert "action.requested" not in sink.types()
    assert sink.types()[-1] == "turn.failed"


async def test_a_whole_tool_call_still_runs(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    refunds: list[tuple[str, int]] = []
    agent = refund_agent(refunds)
    api.enqueue(
        sse_reply(Text("Refunding."), CUT_REFUND),
        sse_reply(Text("Refunded in full.")),
    )

    result = await run_turn(store, client, agent, RecordingSink())

    assert result.status == TurnStatus.COMPLETED
    assert refunds == [("A-1", 100000)]
