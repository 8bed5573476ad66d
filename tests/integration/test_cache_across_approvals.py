"""Resuming after an approval without paying for the prompt again, through the real `anthropic`
SDK over HTTP against the stand-in, whose prompt cache keeps Anthropic's rules on its own clock.

A person takes longer than the cache's default five minutes to decide, so a turn that may wait
for one writes its prefix with the 1-hour lifetime: thirty minutes later, the first call after
the answer reads it. Runs on every store.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import (
    Agent,
    AnthropicModel,
    AssistantMessage,
    Runtime,
    SessionStore,
    ToolContext,
    TurnStatus,
    tool,
)
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse, sse_reply
from tests.support.hitl_fixtures import slack_event

# Long enough to be cached by claude-sonnet-4-6 (at least 2,048 tokens, by the stand-in's count).
PLAYBOOK = "You are the refunds desk. " + " ".join(
    f"Rule {i}: check the order, the amount paid and what was refunded before acting."
    for i in range(200)
)
MODEL = "claude-sonnet-4-6"


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    # Made off the loop: the SDK's first client imports its HTTP stack (100+ ms on a busy box).
    client = await asyncio.to_thread(
        AsyncAnthropic, base_url=api.base_url, api_key="sk-ant-test-cache", max_retries=0
    )
    yield client
    await client.close()


@tool
async def issue_refund(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once a person approves."""
    approved = await ctx.request_input(id="approve", prompt=f"Refund order {order}?")
    return {"refunded": approved is True}


@tool
def lookup(order: str) -> dict[str, Any]:
    """Look an order up (local: it can never ask anyone)."""
    return {"order": order, "paid": 30}


def _breakpoints(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = [*body.get("tools", []), *body.get("system", [])]
    blocks += [b for m in body["messages"] for b in m["content"] if isinstance(b, dict)]
    return [b["cache_control"] for b in blocks if "cache_control" in b]


async def _park_wait_answer(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic, agent: Agent, wait: float
) -> list[AssistantMessage]:
    api.enqueue(
        sse_reply(Text("Asking."), ToolUse("tu_1", "issue_refund", {"order": "42"})),
        sse_reply(Text("Refunded.")),
    )
    model = AnthropicModel(client=client, model=MODEL, restart_delay=0)
    async with Runtime(store, model, agent=agent, poll_interval=0.02) as runtime:
        session = runtime.session(agent, "s1")
        parked = await session.result(await session.start(slack_event("refund 42"), turn_id="T1"))
        assert parked.status == TurnStatus.SUSPENDED
        api.advance(wait)  # the person takes their time
        await session.resume("T1", "approve", True, by="U1")
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    transcript = await store.load_transcript("s1")
    return [m for m in transcript if isinstance(m, AssistantMessage)]


async def test_the_first_call_after_a_slow_approval_reads_the_cache(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    agent = Agent(name="refunds", instructions=PLAYBOOK, tools=[issue_refund])

    before, after = await _park_wait_answer(store, api, client, agent, wait=30 * 60)

    first, second = api.bodies
    assert _breakpoints(first) == [{"type": "ephemeral", "ttl": "1h"}] * 3
    assert before.usage.cache_write_tokens > 0
    assert before.usage.cache_read_tokens == 0
    assert after.usage.cache_read_tokens == before.usage.cache_write_tokens, (
        "thirty minutes after it was written, the whole prefix is read back"
    )
    assert _breakpoints(second) == [{"type": "ephemeral", "ttl": "1h"}] * 3


async def test_with_the_default_lifetime_the_prefix_is_gone_after_thirty_minutes(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """The control: the same turn with 5-minute breakpoints (`long_cache=False` in effect, via
    a model name the adapter does not send the 1-hour lifetime to) pays for the prompt again."""
    agent = Agent(name="refunds", instructions=PLAYBOOK, tools=[issue_refund])
    api.enqueue(
        sse_reply(Text("Asking."), ToolUse("tu_1", "issue_refund", {"order": "42"})),
        sse_reply(Text("Refunded.")),
    )
    model = AnthropicModel(client=client, model=MODEL, restart_delay=0, long_cache=False)
    async with Runtime(store, model, agent=agent, poll_interval=0.02) as runtime:
        session = runtime.session(agent, "s1")
        await session.result(await session.start(slack_event("refund 42"), turn_id="T1"))
        api.advance(30 * 60)
        await session.resume("T1", "approve", True, by="U1")
        await session.result("T1")
    before, after = [
        m for m in await store.load_transcript("s1") if isinstance(m, AssistantMessage)
    ]
    assert _breakpoints(api.bodies[0]) == [{"type": "ephemeral"}] * 3
    assert before.usage.cache_write_tokens > 0
    assert after.usage.cache_read_tokens == 0, "a 5-minute entry is gone after thirty"


async def test_a_turn_that_can_never_wait_keeps_the_default_lifetime(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    agent = Agent(name="lookups", instructions=PLAYBOOK, tools=[lookup])
    api.enqueue(
        sse_reply(Text("Looking."), ToolUse("tu_1", "lookup", {"order": "42"})),
        sse_reply(Text("Paid 30.")),
    )
    model = AnthropicModel(client=client, model=MODEL, restart_delay=0)
    async with Runtime(store, model, agent=agent, poll_interval=0.02) as runtime:
        result = await runtime.session(agent, "s1").turn("look 42")
    assert result.status == TurnStatus.COMPLETED
    assert all(_breakpoints(body) == [{"type": "ephemeral"}] * 3 for body in api.bodies)
    assert result.usage.cache_read_tokens > 0, "the second step read what the first wrote"
