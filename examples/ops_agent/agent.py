"""The example ops agent `bot serve` runs by default (AGENT_DIR points elsewhere to replace it).

Refunds: `issue_refund` is a confirmed write. Whoever asked for the refund approves it, unless
`OPS_REFUND_APPROVERS` (comma-separated Slack user ids) is set: then only those people may, and
the confirmation names the `refund-approvers` policy, which `authorize_answer` below decides (a
real app could check a Slack user group with the principal's team and user ids instead), and a
refund over $100 needs two of them (`Quorum(2, users=...)`, see `config.py`). The
refund goes to `payments.py`, a stand-in for a payment provider, in the bot's database. With
`OPS_AUTO_REFUND_LIMIT` set, a refund up to that many dollars on an order never refunded before
needs nobody: `approve_automatically` below approves it as the `small-refunds` policy.
Settings are read once, when the agent is loaded (see `config.py`).
"""

from __future__ import annotations

from agent import AnswerRequest, PolicyApproval, ProposedWrite, Schedule

from .config import REFUND_POLICY, SMALL_REFUNDS, OpsConfig
from .payments import PaymentsStandIn

_config = OpsConfig()

name = "ops"

surfaces = {"slack": {"mode": "append"}}

schedules = [
    Schedule(
        name="daily",
        cron="0 9 * * 1-5",
        seed="Good morning! Summarize yesterday's open orders and pending refunds for the team.",
        channel=_config.channel,
    )
]


async def authorize_answer(request: AnswerRequest) -> bool:
    """May this person answer a `{"policy": "refund-approvers"}` request?"""
    if request.get("policy") != REFUND_POLICY:
        return False
    principal = request.get("principal") or {}
    return principal.get("user") in _config.refund_approvers


async def approve_automatically(proposal: ProposedWrite) -> PolicyApproval | None:
    """A small first refund of an order needs nobody; anything else goes to a person."""
    limit = _config.auto_refund_limit
    amount = proposal.arguments.get("amount")
    order_id = proposal.arguments.get("order_id")
    if proposal.tool != "issue_refund" or limit <= 0 or not isinstance(order_id, str):
        return None
    if not isinstance(amount, int | float) or not 0 < amount <= limit:
        return None
    async with PaymentsStandIn.open(_config.database_url) as payments:
        if await payments.refunded_cents(order_id) > 0:
            return None  # a second refund of one order is a person's call
    return PolicyApproval(
        policy=SMALL_REFUNDS,
        reason=f"${amount:.2f} is within the ${limit:.2f} limit, and order {order_id} "
        "had no refund before",
    )
