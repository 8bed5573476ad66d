"""A local tool: its write goes through the store handle, so the order row commits (or rolls
back) with the step itself, exactly once."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from agent import ToolContext, tool


@tool
def create_order(item: str, quantity: int, ctx: ToolContext) -> dict[str, Any]:
    """Place an order for an item."""
    # Raises FatalToolError on a store without a transactional handle (MemoryStore).
    conn: Connection = ctx.store.unwrap()
    conn.execute(
        text("create table if not exists ops_orders (item text not null, quantity integer)")
    )
    conn.execute(
        text("insert into ops_orders (item, quantity) values (:item, :quantity)"),
        {"item": item, "quantity": quantity},
    )
    return {"item": item, "quantity": quantity, "status": "placed"}
