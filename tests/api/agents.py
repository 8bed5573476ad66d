"""Agents and scripts of the API tests (the scripted model; no network), beside the Slack
tests' own (`tests.bot.agents`), whose tools they reuse."""

from __future__ import annotations

from typing import Any

from agent import Agent, AnswerRequest, ScriptedReply, ToolCall, ToolContext, tool
from tests.bot import agents as bot_agents

REFUNDS: list[str] = []
"""Every refund paid (the tool's code after the answer): an answered park pays exactly once."""


@tool
async def pay_refund(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once the requester approves."""
    approved = await ctx.request_input(
        id="approve", prompt=f"Refund order {order_id}?", schema={"type": "boolean"}
    )
    if approved is not True:
        return {"refunded": False}
    REFUNDS.append(f"{ctx.session}:{ctx.turn_id}:{order_id}")
    return {"refunded": True}


async def broken_hook(request: AnswerRequest) -> bool:
    raise RuntimeError("the approvals service is down")


AGENT = Agent(
    name="api-ops",
    instructions="Help with orders.",
    tools=[*bot_agents.AGENT.tools, pay_refund],
    authorize_answer=bot_agents.managers_only,
)
BROKEN_HOOK = Agent(
    name="api-ops",
    instructions="Help with orders.",
    tools=[*bot_agents.AGENT.tools, pay_refund],
    authorize_answer=broken_hook,
)

PAY = [
    ScriptedReply(
        text=["Checking ", "the refund."],
        tool_calls=[ToolCall(id="c_pay", name="pay_refund", input={"order_id": "42"})],
    ),
    ScriptedReply(text=["Refund ", "settled."]),
]
