"""The FAN-7 agent: a remote `reserve_inventory` write coordinated by `run_effect` against the
inventory stand-in over real HTTP, then a local `create_work_order` step.

`reserve_inventory` is a `confirmation="capability"` tool: the turn that proposes it asks a person
to approve the reservation's details; the turn acting on the approval runs it again, and only
there, with the details approved, does it reserve."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from agent import (
    Agent,
    EffectAuthority,
    EffectNotAppliedError,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    tool,
)
from bot.testing.http import local_client
from tests.support.engine_fixtures import record_run


def reserve_tool(service_url: str, *, timeout: float = 0.3, reconcile: bool = False) -> Any:
    @tool(effect="write", confirmation="capability")
    async def reserve_inventory(
        operation_id: str, sku: str, quantity: int, ctx: ToolContext
    ) -> dict[str, Any]:
        """Reserve units for a work order (the operation id is the idempotency key)."""
        payload = {"sku": sku, "quantity": quantity}
        details = {"operation": operation_id, **payload}
        if not ctx.confirmed(details):
            return ctx.needs_confirmation(
                prompt=f"Reserve {quantity} {sku} for {operation_id}?", details=details
            )

        async def call(authority: EffectAuthority) -> Any:
            record_run("reserve:call")
            async with local_client(base_url=service_url, timeout=timeout) as client:
                response = await client.post(
                    "/reservations",
                    json=payload,
                    headers={"Idempotency-Key": authority.idempotency_key},
                )
            if response.status_code in (409, 422):
                raise EffectNotAppliedError(response.json()["error"])
            response.raise_for_status()
            return response.json()

        async def lookup(authority: EffectAuthority) -> Any:
            record_run("reserve:lookup")
            async with local_client(base_url=service_url, timeout=5) as client:
                response = await client.get(f"/receipts/{authority.idempotency_key}")
            if response.status_code == 404:
                raise EffectNotAppliedError("the service has no record of this key")
            response.raise_for_status()
            return response.json()

        effect = await ctx.run_effect(
            operation_id, call, payload=payload, reconcile=lookup if reconcile else None
        )
        return {"reservation": effect.value, "receipt": effect.receipt.receipt_id}

    return reserve_inventory


@tool
def create_work_order(reservation: str, ctx: ToolContext) -> dict[str, Any]:
    """Open the work order for a reservation (local: commits with the step)."""
    record_run("work_order")
    conn: Connection = ctx.store.unwrap()
    conn.execute(text("create table if not exists test_orders (item text, quantity integer)"))
    conn.execute(text("insert into test_orders values (:i, 1)"), {"i": reservation})
    return {"work_order": f"wo-{reservation}"}


def fan_agent(service_url: str, **kw: Any) -> Agent:
    return Agent(
        name="fan",
        instructions="Reserve parts, then open the work order.",
        tools=[reserve_tool(service_url, **kw), create_work_order],
    )


def reserve_call(operation: str, quantity: int, call_id: str = "r") -> ToolCall:
    return ToolCall(
        id=call_id,
        name="reserve_inventory",
        input={"operation_id": operation, "sku": "FILTER-A", "quantity": quantity},
    )


def fan_model(operation: str = "FAN-7", quantity: int = 2) -> ScriptedModel:
    """Reserve (and wait for the approval); then, in the turn acting on the approval (whose
    step 0 is the approved call), open the work order with the reservation id; then report."""

    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0:
            return ScriptedReply(tool_calls=[reserve_call(operation, quantity)])
        last = request.messages[-1]
        if not last.is_error and last.result.get("status") == "confirmation_pending":
            return ScriptedReply(text="The reservation awaits approval.")
        if step == 1 and not last.is_error:
            reservation = last.result["reservation"]["reservation"]
            return ScriptedReply(
                tool_calls=[
                    ToolCall(id="w", name="create_work_order", input={"reservation": reservation})
                ]
            )
        if step == 1:
            return ScriptedReply(text=f"Could not reserve: {last.result['error']}")
        return ScriptedReply(text="Work order opened.")

    return ScriptedModel(responder=respond)
