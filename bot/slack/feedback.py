"""👍 / 👎 under a final answer: Slack's feedback buttons, and what a click on them records.

The buttons are a `context_actions` block holding a `feedback_buttons` element
(https://docs.slack.dev/reference/block-kit/blocks/context-actions-block,
https://docs.slack.dev/reference/block-kit/block-elements/feedback-buttons-element), sent as the
blocks of the reply's last `chat.stopStream` (or its last edit). Each button's value names the
answer (session and turn) and the verdict; a click (`block_actions` with a `feedback_buttons`
action) is stored durably before it is acknowledged, as an answer to an approval is: who
clicked (from the signed payload, never the button), their workspace, the answer, the verdict
and when Slack says it was clicked. The buttons toggle, so a person's last click on an answer
is the one kept.

A value that does not belong to the clicked message (another session's, a forged one), or a
click by a person of another workspace than the conversation's, records nothing.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from bot.slack.identity import principal_of
from bot.slack.inbound import parse_session_key
from storage.delivery.store import DeliveryStore, Feedback

log = logging.getLogger(__name__)
Ack = Callable[[], Awaitable[Any]]

FEEDBACK = "agent_feedback"
Verdict = Literal["positive", "negative"]


def feedback_blocks(session: str, turn_id: str) -> list[dict[str, Any]]:
    """The feedback buttons for one answer (at most 2,000 characters per value)."""

    def button(text: str, label: str, verdict: Verdict) -> dict[str, Any]:
        value = json.dumps({"v": verdict, "s": session, "t": turn_id}, separators=(",", ":"))
        return {
            "text": {"type": "plain_text", "text": text},
            "accessibility_label": label,
            "value": value[:2000],
        }

    return [
        {
            "type": "context_actions",
            "block_id": f"feedback:{turn_id}"[:255],
            "elements": [
                {
                    "type": "feedback_buttons",
                    "action_id": FEEDBACK,
                    "positive_button": button("👍", "This answer helped", "positive"),
                    "negative_button": button("👎", "This answer did not help", "negative"),
                }
            ],
        }
    ]


@dataclass(frozen=True, kw_only=True)
class FeedbackClick:
    session: str
    turn_id: str
    verdict: Verdict
    user: str
    team: str
    channel: str
    message_ts: str
    clicked_at: float

    @classmethod
    def parse(cls, body: dict[str, Any]) -> FeedbackClick:
        action = body["actions"][0]
        data = json.loads(action["value"])
        verdict = data["v"]
        if verdict not in ("positive", "negative"):
            raise ValueError("unknown verdict")
        container = body.get("container") or {}
        clicker = principal_of(body)  # in Enterprise Grid `user.team_id` is the org's id
        if clicker is None or not clicker.get("team"):
            raise ValueError("a click by nobody of a known workspace")
        try:
            clicked_at = float(action.get("action_ts") or time.time())
        except (TypeError, ValueError):
            clicked_at = time.time()
        return cls(
            session=str(data["s"]),
            turn_id=str(data["t"]),
            verdict=verdict,
            user=str(clicker.get("user")),
            team=str(clicker.get("team")),
            channel=str(container.get("channel_id") or body["channel"]["id"]),
            message_ts=str(container.get("message_ts") or body["message"]["ts"]),
            clicked_at=clicked_at,
        )


class FeedbackHandler:
    def __init__(self, *, delivery: DeliveryStore) -> None:
        self.delivery = delivery

    async def handle(self, body: dict[str, Any], ack: Ack) -> None:
        """Record the click, then acknowledge it (a crash before the ack makes Slack send the
        click again, and storing it twice is the same row)."""
        try:
            click = FeedbackClick.parse(body)
        except (KeyError, IndexError, AttributeError, ValueError, TypeError):
            log.info("unreadable feedback click ignored")
            await ack()
            return
        try:
            if await self._belongs(click):
                await self.delivery.record_feedback(
                    Feedback(
                        session_key=click.session,
                        turn_id=click.turn_id,
                        team=click.team,
                        user_id=click.user,
                        value=click.verdict,
                        clicked_at=click.clicked_at,
                    )
                )
            else:
                log.info("a feedback click that is not this message's was ignored")
        finally:
            await ack()

    async def _belongs(self, click: FeedbackClick) -> bool:
        """The value names an answer this bot posted as the clicked message, in a conversation
        of the clicker's own workspace."""
        try:
            team, _, _ = parse_session_key(click.session)
        except ValueError:
            return False
        if team != click.team:
            return False
        posts = await self.delivery.posts(click.session, turn_id=click.turn_id, kind="reply")
        return any(p.ts == click.message_ts and p.channel == click.channel for p in posts)
