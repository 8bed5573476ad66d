"""The agent and script the offline Slack demo runs: an ops assistant that looks an order up,
places a replacement (a local write, exactly-once with the step) and refunds it (a remote call
that parks until the requester approves). The scripted model stands in for Anthropic."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from agent import Agent, ScriptedReply, ToolCall, ToolContext, tool


@tool
async def lookup_order(order_id: str) -> dict[str, Any]:
    """Read an order (remote, at-least-once, so it only reads)."""
    return {"order_id": order_id, "item": "blue mug", "paid": 18.5, "status": "delivered, broken"}


@tool
def create_order(item: str, quantity: int, ctx: ToolContext) -> dict[str, Any]:
    """Place an order; the row commits in the same transaction as the step."""
    conn: Connection = ctx.store.unwrap()
    conn.execute(text("create table if not exists demo_orders (item text, quantity integer)"))
    conn.execute(
        text("insert into demo_orders (item, quantity) values (:item, :q)"),
        {"item": item, "q": quantity},
    )
    return {"item": item, "quantity": quantity, "status": "placed"}


@tool
async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once the requester approves it."""
    approved = await ctx.request_input(
        id="approve-refund",
        prompt=f"Approve a ${amount:.2f} refund on order {order_id}?",
        schema={"type": "boolean"},
    )
    if approved is not True:
        return {"refunded": False}
    return {"refunded": True, "order_id": order_id, "amount": amount}


DEMO_AGENT = Agent(
    name="ops-demo",
    instructions="You help the ops team with orders and refunds.",
    tools=[lookup_order, create_order, issue_refund],
)

DEMO_SCRIPT = [
    ScriptedReply(
        text=["Let me look up ", "order 42."],
        tool_calls=[ToolCall(id="call_lookup", name="lookup_order", input={"order_id": "42"})],
    ),
    ScriptedReply(
        text=["The mug arrived broken: ", "I'll send a replacement ", "and refund the order."],
        tool_calls=[
            ToolCall(
                id="call_order", name="create_order", input={"item": "blue mug", "quantity": 1}
            ),
            ToolCall(
                id="call_refund", name="issue_refund", input={"order_id": "42", "amount": 18.5}
            ),
        ],
    ),
    ScriptedReply(
        text=[
            "Done: a replacement blue mug ",
            "is on its way and $18.50 ",
            "was refunded on order 42.",
        ]
    ),
]
