"""A remote tool that parks the turn until a refund approver answers (Approve / Deny in Slack).

Everything before `request_input` runs again when the turn resumes, so the refund itself comes
after the answer. It is at-least-once, so the provider call carries an idempotency key.
"""

from __future__ import annotations

from typing import Any

from agent import ToolContext, tool


@tool
async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once a refund approver agrees."""
    approved = await ctx.request_input(
        id="approve-refund",
        prompt=f"Approve a ${amount:.2f} refund on order {order_id}?",
        schema={"type": "boolean"},
        answerers={"policy": "refund-approvers", "scope": "refunds"},
    )
    if approved is not True:
        return {"refunded": False, "order_id": order_id}
    # A real payment call goes here, keyed on f"refund:{ctx.turn_id}:{order_id}".
    return {"refunded": True, "order_id": order_id, "amount": amount}
