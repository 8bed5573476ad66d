"""A local tool: its write goes through the store handle, so the order row commits (or rolls
back) with the step itself, exactly once. The table comes from migration 0003, never from DDL
here: `create table if not exists` in concurrent first steps collides on PostgreSQL."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import Connection

from agent import ToolContext, ToolError, tool

from ..tables import ops_orders


@tool
def create_order(item: str, quantity: int, unit_price: float, ctx: ToolContext) -> dict[str, Any]:
    """Place an order for an item at a unit price in dollars; returns the new order's id."""
    if quantity <= 0 or unit_price < 0:
        raise ToolError("quantity must be positive and unit_price must not be negative")
    amount_cents = round(quantity * unit_price * 100)
    # A random id is safe here: the step that draws it commits it with the row, exactly once.
    order_id = f"ord_{uuid.uuid4().hex[:12]}"
    # Raises FatalToolError on a store without a transactional handle (MemoryStore).
    conn: Connection = ctx.store.unwrap()
    conn.execute(
        ops_orders.insert().values(
            order_id=order_id, item=item, quantity=quantity, amount_cents=amount_cents
        )
    )
    return {
        "order_id": order_id,
        "item": item,
        "quantity": quantity,
        "amount": amount_cents / 100,
        "status": "placed",
    }
