"""The example's settings, read the way the bot reads its own (the environment, then `.env`)
once, when the agent is loaded, so the tools and `authorize_answer` agree on them.

- `DATABASE_URL`: where the payments stand-in keeps its refunds. The same variable (and default)
  as the bot's, so the stand-in uses the bot's own database, whose `ops_refunds` and
  `ops_orders` tables `bot db upgrade` creates (migration 0003).
- `OPS_REFUND_APPROVERS`: comma-separated Slack user ids. Unset, whoever asked for a refund
  approves it; set, only these people do (the asker included only if listed), and a refund
  over `LARGE_REFUND` dollars needs two of them (when at least two are listed).
- `OPS_AUTO_REFUND_LIMIT`: dollars. A refund up to this much, on an order never refunded
  before, is approved by the `small-refunds` policy without anyone (`approve_automatically` in
  `agent.py`); 0, the default, asks a person for every refund.
- `OPS_REFUND_ESCALATE_TO`: comma-separated Slack user ids. A refund nobody approved or denied
  in `REFUND_ESCALATE_AFTER` is escalated to them: any one of them may answer it from then on
  (its own approvers still may). Unset, nothing is escalated. Every refund request is reminded
  once after `REFUND_REMIND_AFTER` either way.
- `OPS_CHANNEL`: where the daily summary is posted.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent import Quorum, QuorumAnswerer
from bot.core.settings import DEFAULT_DATABASE_URL

REFUND_POLICY = "refund-approvers"
SMALL_REFUNDS = "small-refunds"
"""The policy that approves small refunds without a person (`OPS_AUTO_REFUND_LIMIT`)."""
LARGE_REFUND = 100.0
"""Dollars above which a refund needs two approvers (a `Quorum`)."""
REFUND_REMIND_AFTER = 4 * 3600.0
"""Seconds after which whoever may approve a refund is reminded, once."""
REFUND_ESCALATE_AFTER = 24 * 3600.0
"""Seconds after which an unanswered refund is escalated to `OPS_REFUND_ESCALATE_TO`."""


class OpsConfig(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str = Field(default=DEFAULT_DATABASE_URL, alias="DATABASE_URL")
    refund_approvers_list: str = Field(default="", alias="OPS_REFUND_APPROVERS")
    channel: str = Field(default="C0OPS", alias="OPS_CHANNEL")
    auto_refund_limit: float = Field(default=0.0, ge=0.0, alias="OPS_AUTO_REFUND_LIMIT")
    refund_escalate_to_list: str = Field(default="", alias="OPS_REFUND_ESCALATE_TO")

    @property
    def refund_escalation(self) -> tuple[float, list[str]] | None:
        """`escalate_after` for refunds: a day unanswered, then the listed people; None unset."""
        users = sorted({u.strip() for u in self.refund_escalate_to_list.split(",") if u.strip()})
        return (REFUND_ESCALATE_AFTER, users) if users else None

    @property
    def refund_approvers(self) -> frozenset[str]:
        return frozenset(u.strip() for u in self.refund_approvers_list.split(",") if u.strip())

    @property
    def refund_answerers(self) -> dict[str, str] | None:
        """Who confirms a refund: None lets the engine ask the attested requester; a listed
        set of approvers turns it into the policy `authorize_answer` decides."""
        if not self.refund_approvers:
            return None
        return {"policy": REFUND_POLICY, "scope": "refunds"}

    def answerers_for_refund(
        self, arguments: dict[str, Any]
    ) -> QuorumAnswerer | dict[str, str] | None:
        """Who confirms this refund: over `LARGE_REFUND`, two of the listed approvers (each
        vote counted in Slack, the API and the Home inbox); otherwise `refund_answerers`."""
        amount = arguments.get("amount")
        large = isinstance(amount, int | float) and amount > LARGE_REFUND
        if large and len(self.refund_approvers) >= 2:
            return Quorum(2, users=sorted(self.refund_approvers))
        return self.refund_answerers
