"""A write tool with a durable effect: the model proposes the reservation, a person confirms it,
and the warehouse call runs through `ctx.run_effect`, which records a receipt before calling and
hands the provider an idempotency key, so a crash or a retry never reserves twice. Whoever
approves one may also allow the requester's further reservations, in the thread or the channel,
for up to a day ("Approve & allow again": a standing grant)."""

from __future__ import annotations

from typing import Any

from agent import ToolContext, tool


async def _reserve_at_warehouse(sku: str, quantity: int, idempotency_key: str) -> dict[str, Any]:
    """Stands in for the warehouse API (which dedupes on the idempotency key)."""
    return {"sku": sku, "quantity": quantity, "reservation": f"R-{idempotency_key[-8:]}"}


@tool(effect="write", confirmation="required", grantable_for=86_400)
async def reserve_inventory(sku: str, quantity: int, ctx: ToolContext) -> dict[str, Any]:
    """Reserve stock for an order (needs a person's confirmation)."""

    async def reserve(authority: Any) -> dict[str, Any]:
        return await _reserve_at_warehouse(sku, quantity, authority.idempotency_key)

    effect = await ctx.run_effect(
        f"reserve:{sku}", reserve, payload={"sku": sku, "quantity": quantity}
    )
    return {"reserved": True, **effect.value}
