"""A confirmed write: the model proposes the refund, a person approves it, and only then is the
payment provider called, through `ctx.run_effect`, with an idempotency key it honours.

Who approves: by default the person who asked (the turn's attested speaker; the engine picks
them because `answerers` is left None). With `OPS_REFUND_APPROVERS` set (comma-separated Slack
user ids), the listed people instead, through the `refund-approvers` policy that
`authorize_answer` in `agent.py` decides. The list is read when the agent is loaded. Whoever
may approve is reminded after four hours; with `OPS_REFUND_ESCALATE_TO` set, a refund still
unanswered after a day is escalated to those people (see `config.py`). Whoever approves may
change the amount first ("Edit & approve"); the refund then pays what they approved, never more
than a change of approvers would allow (an edit past the two-approver line is refused).

The provider is `payments.py`, a stand-in that records refunds in `ops_refunds`; no money moves.
"""

from __future__ import annotations

from typing import Any, cast

from agent import EffectAuthority, EffectNotAppliedError, ToolContext, tool

from ..config import REFUND_REMIND_AFTER, OpsConfig
from ..payments import PaymentsStandIn, dollars

_config = OpsConfig()


@tool(
    effect="write",
    confirmation="required",
    answerers=_config.answerers_for_refund,
    remind_after=REFUND_REMIND_AFTER,
    escalate_after=_config.refund_escalation,
    editable=["amount"],
)
async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund part or all of what an order was paid, in dollars (a person approves it first)."""
    amount_cents = round(amount * 100)

    def provider_key(authority: EffectAuthority) -> str:
        # The receipt key is unique within the session; the provider's keys are global.
        return f"{ctx.session}/{authority.idempotency_key}"

    async def pay(authority: EffectAuthority) -> dict[str, Any]:
        async with PaymentsStandIn.open(_config.database_url) as payments:
            return await payments.refund(
                order_id=order_id,
                amount_cents=amount_cents,
                idempotency_key=provider_key(authority),
            )

    async def reconcile(authority: EffectAuthority) -> dict[str, Any]:
        async with PaymentsStandIn.open(_config.database_url) as payments:
            found = await payments.find(provider_key(authority))
        # "Not there" is safe to act on even if a stalled worker's call lands later: any retry
        # sends the same key, and the provider pays once per key.
        if found is None:
            raise EffectNotAppliedError("the payments provider has no refund under this key")
        return found

    # One refund per approved proposal: the approval's turn is the business operation.
    effect = await ctx.run_effect(
        f"refund:{ctx.turn_id}:{order_id}",
        pay,
        payload={"order_id": order_id, "amount_cents": amount_cents},
        reconcile=reconcile,
    )
    # The value `pay` (or `reconcile`) returned, stored with the receipt as JSON.
    receipt = cast(dict[str, Any], effect.value)
    return {
        "refunded": dollars(amount_cents),
        "order_id": order_id,
        "refund_id": receipt["refund_id"],
        "provider": "the example's payments stand-in (no real money moved)",
    }
