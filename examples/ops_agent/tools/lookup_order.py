"""A local read: the order as `create_order` stored it and what has been refunded of it, so the
model can propose a refund that fits before anyone is asked to approve it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, func, select

from agent import ToolContext, ToolError, tool

from ..tables import ops_orders, ops_refunds


@tool
def lookup_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Look an order up: item, quantity, amount paid, amount refunded so far."""
    conn: Connection = ctx.store.unwrap()
    order = conn.execute(select(ops_orders).where(ops_orders.c.order_id == order_id)).first()
    if order is None:
        raise ToolError(f"no order {order_id}")
    # The payments stand-in shares the database, so its refunds can be summed here; with a
    # real provider this would be a call to its API.
    refunded = conn.execute(
        select(func.coalesce(func.sum(ops_refunds.c.amount_cents), 0)).where(
            ops_refunds.c.order_id == order_id
        )
    ).scalar_one()
    return {
        "order_id": order_id,
        "item": order.item,
        "quantity": order.quantity,
        "paid": order.amount_cents / 100,
        "refunded": refunded / 100,
    }
