"""The example ops agent `bot serve` runs by default (AGENT_DIR points elsewhere to replace it).

`authorize_answer` decides `{"policy": ...}` answerers: here the refund approvers are listed in
OPS_REFUND_APPROVERS (Slack user ids); a real app could check a Slack user group with the
principal's team and user ids instead.
"""

from __future__ import annotations

import os
from typing import Any

from agent.agent_def import Schedule

name = "ops"

surfaces = {"slack": {"mode": "append"}}

schedules = [
    Schedule(
        name="daily",
        cron="0 9 * * 1-5",
        seed="Good morning! Summarize yesterday's open orders and pending refunds for the team.",
        channel=os.environ.get("OPS_CHANNEL", "C0OPS"),
    )
]


async def authorize_answer(request: dict[str, Any]) -> bool:
    """May this person answer a `{"policy": "refund-approvers"}` request?"""
    if request.get("policy") != "refund-approvers":
        return False
    approvers = {u.strip() for u in os.environ.get("OPS_REFUND_APPROVERS", "").split(",") if u}
    principal = request.get("principal") or {}
    return principal.get("user") in approvers
