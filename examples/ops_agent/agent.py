"""The example ops agent `bot serve` runs by default (AGENT_DIR points elsewhere to replace it).

Refunds: `issue_refund` is a confirmed write. Whoever asked for the refund approves it, unless
`OPS_REFUND_APPROVERS` (comma-separated Slack user ids) is set: then only those people may, and
the confirmation names the `refund-approvers` policy, which `authorize_answer` below decides (a
real app could check a Slack user group with the principal's team and user ids instead), and a
refund over $100 needs two of them (`Quorum(2, users=...)`, see `config.py`). The
refund goes to `payments.py`, a stand-in for a payment provider, in the bot's database.
Settings are read once, when the agent is loaded (see `config.py`).
"""

from __future__ import annotations

from agent import AnswerRequest, Schedule

from .config import REFUND_POLICY, OpsConfig

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
