"""Approve / Deny messages: what a parked request or a proposed write looks like in a thread, and
how a button remembers what it answers.

A button's value names the session, the turn, the request and the digest of the request as it was
shown; the clicker's identity is never in it (it comes from the signed payload), so a forged value
can at most point at a request, never answer as someone else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    MarkdownBlock,
    MarkdownTextObject,
)

from agent import (
    Answerer,
    ConfirmationRequest,
    PolicyAnswerer,
    QuorumAnswerer,
    Tally,
    UserAnswerer,
)
from bot.slack.stop_reasons import stopper
from storage.delivery.bodies import AnswerMark, PostBody

APPROVE = "agent_approve"
DENY = "agent_deny"
ALLOW_AGAIN = "agent_approve_allow_again"
"""Approve & allow again (`bot.slack.grant_modal`): offered on a proposed write of a tool that
allows standing grants."""
ALLOWED_AGAIN = "allowed_again"
"""The key of an approval's `AnswerMark.extra` saying where and how long it was allowed again
("in this thread for 1 day"), so the message says so whoever shows it (the click, or the
renderer after a crash)."""
EDIT = "agent_approve_edit"
"""Edit & approve (`bot.slack.edit_modal`): offered on a proposed write of a tool whose
arguments its approver may change first."""
EDITED = "edited"
"""The key of an approval's `AnswerMark.extra` saying what the approver changed ("amount from
400 to 40"), as `ALLOWED_AGAIN` says where it was allowed again."""
Kind = Literal["input", "confirm"]
MAX_MARKDOWN = 12_000  # a markdown block's text limit


@dataclass(frozen=True, kw_only=True)
class ApprovalRef:
    kind: Kind
    session: str
    turn_id: str
    ident: str
    """The input id of a parked request, or the confirmation id of a proposed write."""
    digest: str | None = None

    def encode(self) -> str:
        data = {"k": self.kind, "s": self.session, "t": self.turn_id, "i": self.ident}
        if self.digest:
            data["d"] = self.digest
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def decode(cls, value: str) -> ApprovalRef:
        data = json.loads(value)
        kind = data["k"]
        if kind not in ("input", "confirm"):
            raise ValueError(f"unknown approval kind {kind!r}")
        return cls(
            kind=kind, session=data["s"], turn_id=data["t"], ident=data["i"], digest=data.get("d")
        )

    @property
    def post_key(self) -> str:
        return f"{self.session}|{self.turn_id}|{self.kind}|{self.ident}"

    @property
    def escalated_post_key(self) -> str:
        """The request posted again for those it was escalated to: the same buttons, and a key
        ending as the request's own, so whatever ends the request settles it too."""
        return f"{self.session}|{self.turn_id}|escalated|{self.kind}|{self.ident}"


ANYONE = "Anyone in this conversation can answer."


def who_may_answer(answerers: Answerer | None) -> str:
    match answerers:
        case None:
            return ANYONE
        case UserAnswerer(user=user):
            return f"Only <@{user}> can answer."
        case PolicyAnswerer(policy=policy, scope=scope):
            if not policy:  # an empty policy name has always read as unrestricted here
                return ANYONE
            shown = f" ({scope})" if scope else ""
            return f"Answerable by: {policy}{shown}."
        case QuorumAnswerer(quorum=need, users=users, policy=policy, scope=scope, deny=deny):
            if users is not None:
                among = "from " + ", ".join(f"<@{user}>" for user in users)
            else:
                among = f"from {policy}" + (f" ({scope})" if scope else "")
            declines = (
                "a Deny from any of them declines it"
                if deny == "first"
                else "it is declined once most of them deny it"
            )
            return f"Needs {need} approvals {among}; {declines}."
        case _:
            assert_never(answerers)


PROGRESS_BLOCK = "approval_progress"
ANSWERERS_BLOCK = "approval_answerers"
"""The line saying who may answer (an escalation's re-post puts its own line in its place)."""


def progress_text(tally: Tally) -> str:
    """ "1 of 2 approvals: approved by @alice", as the request's message shows it."""
    said = f":ballot_box_with_check: {len(tally.approved_by)} of {tally.need} approvals"
    if tally.approved_by:
        said += ": approved by " + ", ".join(f"<@{user}>" for user in tally.approved_by)
    if tally.denied_by:
        said += "; denied by " + ", ".join(f"<@{user}>" for user in tally.denied_by)
    return said


def vote_counted(tally: Tally, approve: bool) -> str:
    """What the voter alone is told of a vote that did not decide the request."""
    if not tally.counted:
        standing = progress_text(tally)
        return f"You have voted on this request already; your first vote stands ({standing})."
    return f"Your {'approval' if approve else 'Deny'} is counted: {progress_text(tally)}."


def with_progress(blocks: list[dict[str, Any]], tally: Tally) -> list[dict[str, Any]]:
    """The request's message with its progress line (replacing the previous one) above its
    buttons, which stay for everyone who may still answer."""
    line = ContextBlock(
        block_id=PROGRESS_BLOCK, elements=[MarkdownTextObject(text=progress_text(tally))]
    ).to_dict()
    kept = [block for block in blocks if block.get("block_id") != PROGRESS_BLOCK]
    at = next((i for i, b in enumerate(kept) if b.get("type") == "actions"), len(kept))
    return [*kept[:at], line, *kept[at:]]


def confirmation_prompt(confirmation: ConfirmationRequest) -> str:
    """A proposed write's prompt; for a `confirmation="capability"` tool followed by the details
    it showed, as JSON. The approval covers exactly those details (the tool writes only if it
    finds them unchanged), so they belong on the message the person clicks."""
    prompt = confirmation.prompt
    details = confirmation.details
    if details is None:
        return prompt
    shown = json.dumps(details, indent=2, sort_keys=True, ensure_ascii=False)
    return f"{prompt}\n```\n{shown}\n```"


def prompt_blocks(prompt: str) -> list[Block]:
    """The request in standard Markdown (a `markdown` block), the dialect replies use: a prompt
    written by a tool or the model reads the same in the request as in the reply."""
    return [MarkdownBlock(text=f"🙋 {prompt}"[:MAX_MARKDOWN])]


def modal_buttons(
    ref: ApprovalRef, grantable_for: float | None, editable: Sequence[str] | None
) -> list[ButtonElement]:
    """A proposed write's buttons beyond Approve and Deny, in a thread or the Home tab:
    "Approve & allow again" (a tool that allows standing grants) and "Edit & approve" (a tool
    with editable arguments). Neither has a `confirm` dialog: the modal it opens is where the
    person approves."""
    if ref.kind != "confirm":
        return []
    value = ref.encode()
    buttons = []
    if grantable_for is not None:
        buttons.append(
            ButtonElement(text="Approve & allow again", action_id=ALLOW_AGAIN, value=value)
        )
    if editable:
        buttons.append(ButtonElement(text="Edit & approve", action_id=EDIT, value=value))
    return buttons


def approval_blocks(
    ref: ApprovalRef,
    prompt: str,
    answerers: Answerer | None,
    grantable_for: float | None = None,
    editable: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The request with its buttons; with `grantable_for` (the `confirmation.requested` event's:
    the tool allows standing grants) also "Approve & allow again", and with `editable` (its
    arguments the approver may change) "Edit & approve"."""
    value = ref.encode()
    approve = ButtonElement(
        text="Approve",
        action_id=APPROVE,
        value=value,
        style="primary",
        confirm=ConfirmObject(
            title="Approve this request?",
            text=prompt[:300],
            confirm="Approve",
            deny="Cancel",
        ),
    )
    deny = ButtonElement(text="Deny", action_id=DENY, value=value, style="danger")
    elements = [approve, deny, *modal_buttons(ref, grantable_for, editable)]
    blocks = [
        *prompt_blocks(prompt),
        ContextBlock(
            block_id=ANSWERERS_BLOCK, elements=[MarkdownTextObject(text=who_may_answer(answerers))]
        ),
        ActionsBlock(block_id="approval", elements=elements),
    ]
    return [block.to_dict() for block in blocks]


def answered_blocks(prompt: str, verdict: str) -> list[dict[str, Any]]:
    blocks = [*prompt_blocks(prompt), ContextBlock(elements=[MarkdownTextObject(text=verdict)])]
    return [block.to_dict() for block in blocks]


def verdict_text(
    accepted: bool,
    by: str | None,
    approved_by: list[str] | None = None,
    allowed_again: str | None = None,
    changes: str | None = None,
) -> str:
    """Who answered; for a quorum, everyone who approved (and, for a Deny, who denied); for an
    approval that also allowed the tool again, where and for how long; for one that changed
    the call first, what it changed ("amount from 400 to 40")."""
    who = f"<@{by}>" if by else "someone"
    if accepted and approved_by:
        who = ", ".join(f"<@{user}>" for user in approved_by)
    if accepted:
        again = f" and allowed it again {allowed_again}" if allowed_again else ""
        edited = f" with changes: {changes}" if changes else ""
        return f":white_check_mark: Approved by {who}{again}{edited}"
    verdict = f":no_entry: Denied by {who}"
    if approved_by:
        verdict += " (approved by " + ", ".join(f"<@{user}>" for user in approved_by) + ")"
    return verdict


NO_LONGER_PENDING = ":hourglass: This request is no longer pending."
EXPIRED = ":hourglass: This request expired before anyone answered it."


def stopped_verdict(by: str | None) -> str:
    who = f" by {stopper(by)}" if by else ""
    return f":octagonal_sign: Stopped{who}: this request is no longer pending."


def resolution(
    outcome: str,
    by: str | None,
    reason: str | None = None,
    approved_by: list[str] | None = None,
    changes: str | None = None,
) -> str:
    """What a request's message says once it ended, from the engine's `input.resolved` /
    `confirmation.resolved` outcome (`changes`: what an approval changed of the call)."""
    match outcome:
        case "expired":
            return EXPIRED
        case "cancelled":
            return stopped_verdict(by)
        case "accepted" | "denied":
            verdict = verdict_text(outcome == "accepted", by, approved_by, changes=changes)
        case _ if approved_by is not None:  # a quorum's park: its value is the outcome
            verdict = verdict_text(by in approved_by, by, approved_by)
        case _:  # answered (a park's value is the tool's to read, not ours)
            verdict = (
                f":white_check_mark: Answered by <@{by}>" if by else ":white_check_mark: Answered"
            )
    return f"{verdict}: {reason}" if reason and outcome != "accepted" else verdict


def answered_message(body: PostBody) -> tuple[str, list[dict[str, Any]]]:
    """Text and blocks of an approval message once settled: answered (`body.answered` says
    how), or ended without an answer (`body.settled`: expired, stopped)."""
    prompt = body.prompt or "Approval request"
    if body.settled is not None:
        verdict = body.settled
    else:
        answered = body.answered or AnswerMark(by=None, accepted=False)
        verdict = mark_verdict(answered)
        if answered.reason and not answered.accepted:
            verdict += f": {answered.reason}"
    return f"{prompt}\n{verdict}", answered_blocks(prompt, verdict)


def mark_verdict(answered: AnswerMark, *, voters: bool = True) -> str:
    """What an answer's mark says (`voters`: a quorum's approvers named; a late click shows
    only who answered)."""
    again, edited = answered.extra.get(ALLOWED_AGAIN), answered.extra.get(EDITED)
    return verdict_text(
        answered.accepted,
        answered.by,
        answered.approved_by if voters else None,
        again if isinstance(again, str) else None,
        edited if isinstance(edited, str) else None,
    )
