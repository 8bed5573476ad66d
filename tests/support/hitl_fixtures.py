"""Agents and tools for the human-in-the-loop tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent import (
    Agent,
    InboundEvent,
    ScriptedModel,
    ScriptedReply,
    Speaker,
    ToolCall,
    ToolContext,
    tool,
)
from tests.support.engine_fixtures import record_run

CALLS: list[str] = []


def make_refund_tool(
    answerers: dict[str, Any] | None = None, log: Callable[[str], None] | None = None
) -> Any:
    note = log or CALLS.append

    @tool
    async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
        """Refund an order once a person approves."""
        note("before")
        record_run("before")
        approved = await ctx.request_input(
            id="approve-refund",
            prompt=f"Approve a ${amount} refund on order {order_id}?",
            schema={"type": "boolean"},
            answerers=answerers,
        )
        note("after")
        record_run("after")
        return {"refunded": approved is True}

    return issue_refund


def refund_agent(answerers: dict[str, Any] | None = None, **kw: Any) -> Agent:
    return Agent(
        name="ops", instructions="Refund orders.", tools=[make_refund_tool(answerers)], **kw
    )


def refund_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(
                text="Asking for approval.",
                tool_calls=[
                    ToolCall(id="r1", name="issue_refund", input={"order_id": "42", "amount": 30})
                ],
            ),
            ScriptedReply(text="Refund done."),
        ]
    )


def slack_event(text: str, user: str = "U1", attested: bool = True) -> InboundEvent:
    return InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id=user, attested=attested),
        context={"team": "T1", "channel": "C1"},
        raw={"secret": "not stored"},
    )
