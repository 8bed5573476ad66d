"""A click on Approve or Deny as `bot.slack.approval_clicks` handles it: what was clicked (the
button's `ApprovalRef`), by whom (the signed payload's principal, `bot.slack.identity`, never the
button), where (a thread's message, or the Home tab), and how it relates to the request's message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent import AllowAgain, EditRejected, JsonData, Principal, Tally
from bot.slack.approval_blocks import (
    ALLOW_AGAIN,
    ALLOWED_AGAIN,
    APPROVE,
    EDIT,
    EDITED,
    ApprovalRef,
)
from bot.slack.deny_modal import Opened
from bot.slack.edit_modal import field_errors
from bot.slack.grant_modal import SPAN_BLOCK, allowed_again_text
from bot.slack.identity import principal_of, workspace_of
from storage.delivery.bodies import AnswerMark
from storage.delivery.store import Post


@dataclass(frozen=True, kw_only=True)
class Click:
    ref: ApprovalRef
    accepted: bool
    user: str
    principal: Principal
    channel: str | None
    """Where the request's message was clicked; None for a click in the Home tab."""
    message_ts: str | None
    thread_ts: str | None
    home: bool = False
    trigger_id: str | None = None
    reason: str | None = None
    """What a person denying said (the Deny modal)."""
    workspace: str | None = None
    """The workspace the click was sent for (the installation whose token answers it); None:
    the clicker's own."""
    wants_grant: bool = False
    """A click on "Approve & allow again": it opens the modal, it never answers by itself."""
    allow_again: AllowAgain | None = None
    """What the "Approve & allow again" modal's submission chose (`session.confirm`'s)."""
    wants_edit: bool = False
    """A click on "Edit & approve": it opens the modal, it never answers by itself."""
    edits: Mapping[str, JsonData] | None = None
    """What the "Edit & approve" modal's submission changed (`session.confirm`'s `edits`)."""
    changes: str | None = None
    """What those edits change, as the request's message says it ("amount from 400 to 40")."""
    fields: Mapping[str, str] | None = None
    """For a modal's submission: its inputs' block ids by argument name, the first where a
    refusal about none of them is shown (`modal_errors`)."""

    @property
    def speaks_for(self) -> str:
        return self.workspace or str(self.principal.get("team") or "")

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Click:
        """Raises `ValueError` (or the `KeyError`, `TypeError` of a field that is not there)
        for a payload that is not a readable click."""
        action = body["actions"][0]
        container = body.get("container") or {}
        principal = principal_of(body)
        if principal is None:
            raise ValueError("a click by nobody")
        trigger = body.get("trigger_id")
        action_id = action["action_id"]
        common = {
            "ref": ApprovalRef.decode(action["value"]),
            "accepted": action_id in (APPROVE, ALLOW_AGAIN, EDIT),
            "wants_grant": action_id == ALLOW_AGAIN,
            "wants_edit": action_id == EDIT,
            "user": str(principal.get("user")),
            "principal": principal,
            "trigger_id": trigger if isinstance(trigger, str) else None,
            "workspace": workspace_of(body).team,
        }
        if container.get("type") == "view":
            # The Home tab: no channel, no message, a view (the block_actions payload).
            return cls(**common, channel=None, message_ts=None, thread_ts=None, home=True)
        return cls(
            **common,
            channel=str(container.get("channel_id") or body["channel"]["id"]),
            message_ts=str(container.get("message_ts") or body["message"]["ts"]),
            thread_ts=container.get("thread_ts") or (body.get("message") or {}).get("thread_ts"),
        )

    @classmethod
    def completed(cls, opened: Opened, *, accepted: bool, **answer: Any) -> Click:
        """The answer a modal's submission completes, by the person who clicked, where they
        clicked (`answer`: what the modal added to it)."""
        return cls(
            ref=opened.ref,
            accepted=accepted,
            user=str(opened.principal.get("user")),
            principal=opened.principal,
            channel=opened.channel,
            message_ts=opened.message_ts,
            thread_ts=opened.thread_ts,
            home=opened.home,
            **answer,
        )

    @classmethod
    def submitted(cls, opened: Opened, reason: str | None) -> Click:
        """The Deny a modal's submission completes."""
        return cls.completed(opened, accepted=False, reason=reason)

    @classmethod
    def allowing(cls, opened: Opened, allow: AllowAgain) -> Click:
        """The approval (and standing grant) the "Approve & allow again" modal completes; a
        refusal is shown under its last field."""
        return cls.completed(opened, accepted=True, allow_again=allow, fields={"": SPAN_BLOCK})

    @classmethod
    def editing(
        cls,
        opened: Opened,
        edits: Mapping[str, JsonData] | None,
        changes: str | None,
        fields: Mapping[str, str],
    ) -> Click:
        """The approval, with the arguments changed, the "Edit & approve" modal completes
        (`fields`: its inputs' block ids by argument name, in order)."""
        return cls.completed(opened, accepted=True, edits=edits, changes=changes, fields=fields)

    def modal_errors(self, refused: Exception) -> dict[str, str]:
        """The engine's refusal of a modal's submission as its `errors` (`response_action:
        errors`, the modal left open): an argument's error under its input, the rest under the
        first input. Empty where the answer did not come from a modal with inputs."""
        if not self.fields:
            return {}
        first = next(iter(self.fields.values()))
        named = refused.fields if isinstance(refused, EditRejected) else {}
        blocks = {name: block for name, block in self.fields.items() if name}
        return field_errors(named, str(refused), blocks, first)

    @property
    def allowed_again(self) -> str | None:
        """ "in this thread for 1 day", for an approval that allows the tool again."""
        return allowed_again_text(self.allow_again) if self.allow_again is not None else None


def names(button: ApprovalRef, pending: ApprovalRef) -> bool:
    """The button answers the request `pending` describes: the same request, and its digest,
    where the button carries one (a proposed write's buttons posted before they carried the
    digest name it by turn and id, which `session.confirm` accepts)."""
    if button.digest is None and button.kind == "confirm":
        return dataclasses.replace(pending, digest=None) == button
    return pending == button


def answer_mark(click: Click, before: Tally | None = None) -> AnswerMark:
    """How the request's message records the answer; for a request that needs several
    approvals (`before`: the votes before this click), the approvers it resolves with (if this
    vote decides it, they are those before and, for an approval, the clicker)."""
    approved_by = None
    if before is not None:
        approved_by = list(before.approved_by)
        if click.accepted and click.user not in approved_by:
            approved_by.append(click.user)
    again = click.allowed_again
    extra = {ALLOWED_AGAIN: again} if again else {}
    if click.changes:
        extra[EDITED] = click.changes
    return AnswerMark(
        by=click.user,
        accepted=click.accepted,
        reason=click.reason or None,
        approved_by=approved_by,
        extra=extra,
    )


def posted_as(post: Post | None, click: Click) -> str | None:
    """The ts of the request's message: the recorded one, or, where the renderer that posted it
    died before Slack's answer reached it (the row still `posting`), the clicked message, which
    is that post (its buttons carry this request, and only its post puts them on a message)."""
    if post is None:
        return None
    if post.ts:
        return post.ts
    if post.state == "posting" and click.channel and post.channel == click.channel:
        return click.message_ts
    return None


def shown_in(post: Post | None, click: Click) -> bool:
    """The button value belongs to the clicked message: the bot posted that request there (a
    Home click: the bot posted that request)."""
    if click.home:
        return post is not None and post.ts is not None
    return post is not None and post.ts == click.message_ts and post.channel == click.channel
