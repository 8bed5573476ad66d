"""What a thread says when a request nobody answered is reminded or escalated
(`agent._hitl_reminding`): who is asked, and for how long it has waited.

People named by id are mentioned (`<@U…>`), so Slack notifies them: that is the reminder. A
policy names nobody in advance, so its line says which policy may answer instead. A quorum's
people who voted already are not reminded again.
"""

from __future__ import annotations

from typing import Any, assert_never

from slack_sdk.models.blocks import ContextBlock, MarkdownTextObject

from agent import Answerer, PolicyAnswerer, QuorumAnswerer, Tally, UserAnswerer
from bot.slack.approval_blocks import ANSWERERS_BLOCK
from bot.slack.grant_modal import span_text

ESCALATION_BLOCK = "approval_escalation"


def asked(answerers: Answerer | None, tally: Tally | None = None) -> str:
    """Who may (still) answer, as the reminder addresses them."""
    voted = set(tally.approved_by + tally.denied_by) if tally is not None else set()
    match answerers:
        case None:
            return "anyone in this conversation"
        case UserAnswerer(user=user):
            return f"<@{user}>"
        case QuorumAnswerer(users=tuple() as users):
            return ", ".join(f"<@{user}>" for user in users if user not in voted) or "the voters"
        case (
            PolicyAnswerer(policy=policy, scope=scope)
            | QuorumAnswerer(policy=str() as policy, scope=scope)
        ):
            return f"whoever {policy}{f' ({scope})' if scope else ''} allows"
        case QuorumAnswerer():
            return "the voters"
        case _:
            assert_never(answerers)


def reminder_text(
    answerers: Answerer | None, waited: float, prompt: str | None, tally: Tally | None = None
) -> str:
    """The thread note a reminder posts."""
    what = f": _{prompt}_" if prompt else "."
    return (
        f":alarm_clock: Reminder for {asked(answerers, tally)}: this request has waited "
        f"{span_text(waited)} for an answer{what}"
    )


def escalation_text(answerers: Answerer, waited: float) -> str:
    """The line above an escalated request's buttons."""
    return (
        f":rotating_light: Escalated: nobody answered in {span_text(waited)}, so "
        f"{asked(answerers)} can answer it now too."
    )


def escalated_blocks(blocks: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """The request's own blocks (its prompt, its progress and buttons, whose values are the
    request's) with the escalation's line above them, in place of the line saying who alone may
    answer (no longer true)."""
    line = ContextBlock(
        block_id=ESCALATION_BLOCK, elements=[MarkdownTextObject(text=text)]
    ).to_dict()
    dropped = (ESCALATION_BLOCK, ANSWERERS_BLOCK)
    return [line, *(block for block in blocks if block.get("block_id") not in dropped)]
