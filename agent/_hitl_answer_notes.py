"""What reaches the model of a person's answer, or of its absence: reasons, notes, expiry.

A person may say why they answered as they did (`resume(..., reason=)`, `confirm(..., reason=)`),
and a request may expire with nobody answering. Both must reach the model whatever the tool
does with the answer, so the engine carries them: a park's reason or expiry is stored as a note
step beside the answer (`answer:<turn>:<input>`, only when there is something to note, so an
ordinary answer stores what it always stored) and added to the call's result message
(`ToolMessage.note`); a confirmation's reason or expiry is written into the text of the turn
that acts on it. Everything here is text the model and Slack may show, so a reason is scrubbed
of secrets like every error text, and bounded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent._errors import ResumeValidationError
from agent._hitl_answerers import UserAnswerer
from agent._hitl_edits import Edit, changes_text
from agent._messages import JsonValue
from agent._turn_input import ConfirmationAnswer, Trigger, TurnInput
from agent.seams import ConfirmationRecord, ConfirmationStatus

MAX_REASON_CHARS = 500
"""A reason is a note for the model, not a document: longer ones are cut (with an ellipsis)."""

EXPIRY_BY = "expiry"
"""Who "answered" an expired request: the turn acting on an expired confirmation is triggered
by this, since nobody did."""


def clean_reason(reason: str | None, redact: Callable[[str], str]) -> str | None:
    """The reason as it is stored and shown: trimmed, scrubbed (before it is cut, so a secret
    is never left half visible), at most `MAX_REASON_CHARS`; None for nothing to say."""
    if reason is None:
        return None
    if not isinstance(reason, str):
        raise ResumeValidationError("the reason must be text")
    text = redact(reason.strip())
    if not text:
        return None
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 1].rstrip() + "…"
    return text


def check_expiry(value: Any, *, what: str) -> float | None:
    """A request's lifetime in seconds as declared: positive; `math.inf` (or None) is never.

    Returns None for never; raises `ValueError` saying what is wrong, which the caller turns
    into the error of its place (a `ToolError` in a tool, an `AssemblyError` in a declaration).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise ValueError(f"{what}: expires_after must be a number of seconds, got {value!r}")
    if value <= 0:
        raise ValueError(f"{what}: expires_after must be positive, got {value!r}")
    return None if math.isinf(value) else float(value)


def describe_duration(seconds: float) -> str:
    """`90` → "1 minute 30 seconds": how long a request waited, in words the model reads."""
    left = round(seconds)
    parts = []
    for name, size in (("day", 86_400), ("hour", 3_600), ("minute", 60), ("second", 1)):
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count} {name}" + ("s" if count > 1 else ""))
    return " ".join(parts[:2]) or "less than a second"


# -- parks ----------------------------------------------------------------------------------


def note_step_id(turn_id: str, input_id: str) -> str:
    """Where a park's answer note is kept (`input:` holds the answer itself)."""
    return f"answer:{turn_id}:{input_id}"


def answered_note(by: str | None, reason: str) -> dict[str, JsonValue]:
    return {"outcome": "answered", "by": by, "reason": reason}


def expired_note(expires_after: float) -> dict[str, JsonValue]:
    return {"outcome": "expired", "expires_after": expires_after}


def expired_text(input_id: str, note: Mapping[str, JsonValue]) -> str:
    waited = note.get("expires_after")
    within = f" within {describe_duration(float(waited))}" if waited else ""
    return f"nobody answered the request {input_id!r}{within}: it expired"


def reason_text(input_id: str, note: Mapping[str, JsonValue]) -> str:
    who = note.get("by") or "the person who answered"
    if isinstance(who, str) and who.startswith("policy:"):
        policy = who.removeprefix("policy:")
        return (
            f"Nobody was asked {input_id!r}: policy {policy} answered yes automatically: "
            f"{note.get('reason')}"
        )
    return f"The answer to {input_id!r} came with a reason from {who}: {note.get('reason')}"


# -- confirmations --------------------------------------------------------------------------


def confirmation_follow_up(
    record: ConfirmationRecord,
    *,
    status: ConfirmationStatus,
    by: str | None,
    reason: str | None,
    workspace: Mapping[str, str],
    approved_by: Sequence[str] | None = None,
    edit: Edit | None = None,
) -> TurnInput:
    """The input of the turn that acts on an answer to a proposed write (or on its expiry).

    The text is what the model reads; a denial and an expiry both say the call did not run,
    and a reason is quoted. Whatever the acting turn asks next goes to the person who confirmed;
    after an expiry, to whoever could have answered the proposal.
    """
    arguments = json.dumps(record.arguments, sort_keys=True)
    call = f"{record.tool}({arguments})"
    accepted = status == ConfirmationStatus.ACCEPTED
    if status == ConfirmationStatus.EXPIRED:
        waited = (record.expires_at or record.created_at) - record.created_at
        within = f" within {describe_duration(waited)}" if waited > 0 else ""
        text = f"Nobody answered the proposed call {call}{within}: the request expired."
        trigger = Trigger(
            kind="confirmation",
            by=EXPIRY_BY,
            answerers=record.answerers,
            context=dict(workspace),
        )
    else:
        verb = "approved" if accepted else "denied"
        who = by or "The operator"
        if accepted and approved_by:
            who = " and ".join(approved_by)
        text = f"{who} {verb} the proposed call {call}"
        if edit is not None:
            edited = f"{record.tool}({json.dumps(edit.arguments, sort_keys=True)})"
            text += (
                f" after changing {changes_text(edit.changes)}; it runs as {edited}, "
                "not as proposed"
            )
        if approved_by and not accepted:
            text += f" (approved by {' and '.join(approved_by)} before)"
        elif approved_by:
            text += f" ({len(approved_by)} approvals, as it required)"
        if record.details is not None:
            text += f" with the details {json.dumps(record.details, sort_keys=True)}"
        text += "."
        trigger = Trigger(
            kind="confirmation",
            by=by or "unknown",
            answerers=UserAnswerer(user=by) if by else None,
            context=dict(workspace),
        )
    if not accepted:
        text += " It did not run and must not be retried without a new request."
    if reason:
        text += f" Their reason: {reason}"
    return TurnInput(
        text=text,
        trigger=trigger,
        confirmation=ConfirmationAnswer(
            confirmation_id=record.confirmation_id,
            accepted=accepted,
            tool=record.tool,
            call_id=record.call_id,
            arguments=edit.arguments if edit is not None else record.arguments,
            details=record.details,
            proposed_arguments=record.arguments if edit is not None else None,
        ),
    )
