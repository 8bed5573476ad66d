"""What a tool call's task card says it ended as, from the engine's events, and the line a reply
with no last words ends with.

Slack's task statuses are four (`pending`, `in_progress`, `complete`, `error`: the
`task_update` chunk and the `task_card` block take no other), and a call ends in more ways
than that. Each ending is the status it is closest to, with an `output` that says which:

- ran and returned: `complete` (after an approval, "approved by @alice");
- raised (its result is an error): `error`, "failed";
- its request was denied (a park answered `false`, a proposed write refused): `error`,
  "denied by @alice: <their reason>";
- nobody answered in time: `error`, "expired: nobody answered in time";
- the turn was stopped before it ran, while it waited for a person, or while it ran (it
  returned only once asked to stop): `error`, "stopped by @bob" (or "superseded by a newer
  message", "the conversation was reset", ...);
- waiting for a person: `pending`, "waiting for approval".

A park's answer reaches the renderer as `input.resolved` (outcome `answered`, who, why); whether
it was a denial is the answer's value, which the engine keeps under `input:<turn>:<request>`
(`bot.slack.rendering.waiting` reads it). A proposed write's `confirmation.resolved` says
`accepted`, `denied` or `expired`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent import CancelReason
from agent.seams import JsonValue
from bot.slack.clients import UNINSTALLED
from bot.slack.rendering.parts import STATUS_TASK, TASK_MARKS
from bot.slack.stop_reasons import stopper

Verdict = tuple[str, str | None]
"""A task card's (status, output)."""

WAITING = "waiting for approval"
EXPIRED = "expired: nobody answered in time"
FAILED = "failed"
NOTHING_TO_ADD = "_(The agent had nothing to add.)_"
PENDING_WRITE = "confirmation_pending"
"""The `status` of the result a proposed write gets while it waits (`agent._tool_steps`)."""


def _all(approved_by: list[str] | None) -> str:
    """ " by <@A>, <@B>": a quorum's approvers; empty for a request one person answered."""
    return " by " + ", ".join(f"<@{user}>" for user in approved_by) if approved_by else ""


def _who(by: str | None) -> str:
    return f" by {stopper(by)}" if by else ""


def denied(by: str | None, reason: str | None) -> str:
    return f"denied{_who(by)}" + (f": {reason}" if reason else "")


def ended(reason: str, by: str | None = None) -> str:
    """Why a turn's calls ended unfinished, from its `turn.cancelled`."""
    known = {
        CancelReason.STOPPED: f"stopped{_who(by)}",
        CancelReason.REPLACED: "superseded by a newer message",
        CancelReason.RESET: "the conversation was reset",
        UNINSTALLED: "the app was removed from this workspace",
    }
    return known.get(reason, reason)


def park_verdict(
    outcome: str,
    by: str | None,
    reason: str | None,
    value: JsonValue,
    approved_by: list[str] | None = None,
) -> Verdict:
    """How a parked call's request ended (`input.resolved`), with the answer's value (and, for
    a request that needed several approvals, everyone who approved)."""
    match outcome:
        case "expired":
            return "error", EXPIRED
        case "cancelled":
            return "error", ended(CancelReason.STOPPED, by)
        case _ if value is False:
            return "error", denied(by, reason)
        case _ if value is True:
            return "complete", f"approved{_all(approved_by) or _who(by)}"
        case _:
            return "complete", f"answered{_who(by)}"


def confirmation_verdict(
    outcome: str,
    by: str | None,
    reason: str | None,
    approved_by: list[str] | None = None,
    changes: str | None = None,
) -> Verdict:
    """How a proposed write's request ended (`confirmation.resolved`; `changes`: what the
    approver changed of the call first)."""
    match outcome:
        case "accepted":
            edited = f" with changes: {changes}" if changes else ""
            return "complete", f"approved{_all(approved_by) or _who(by)}{edited}"
        case "denied":
            return "error", denied(by, reason)
        case _:
            return "error", EXPIRED


def automatic_verdict(policy: str, granted_by: str | None = None) -> Verdict:
    """A proposed write nobody was asked about: a person's standing grant let it through, or
    the agent's `approve_automatically` rule approved it."""
    if granted_by is not None:
        return "complete", f"allowed again by <@{granted_by}> (standing grant)"
    return "complete", f"approved by policy {policy}"


def is_pending_write(result: JsonValue) -> bool:
    """The result of a proposed write that waits for a person (it has not run)."""
    return isinstance(result, dict) and result.get("status") == PENDING_WRITE


def completed(*, error: str | None, verdict: Verdict | None, cut: bool) -> Verdict:
    """A call's card once it returned (`action.completed`): its request's ending when that was
    a refusal (a denied call that returned is not "✓"), else failed or complete. `cut`: it
    returned after the turn was asked to stop (`turn.cancelled` then says by whom)."""
    if verdict is not None and verdict[0] == "error":
        return verdict
    if error is not None:
        return "error", FAILED
    if cut:
        return "error", "stopped"
    return "complete", verdict[1] if verdict is not None else None


def summary(tasks: Iterable[dict[str, Any]]) -> str:
    """The last line of a reply the model ended without words: what its calls came to
    ("_Done: Issue refund ✓, Track shipment ✗ (failed)._"), or that it had nothing to add.
    The bot's line, not the model's: it is never stored as an assistant message."""
    said: dict[str, dict[str, Any]] = {}
    for task in tasks:
        if task.get("id") != STATUS_TASK and not task.get("progress"):
            said[str(task["id"])] = task  # the call's last card is how it ended
    if not said:
        return NOTHING_TO_ADD
    parts = []
    for task in said.values():
        status = str(task.get("status", ""))
        mark = TASK_MARKS.get(status, "·")
        output = task.get("output")
        shown = f" ({output})" if output and status in ("error", "pending") else ""
        parts.append(f"{task.get('title', task['id'])} {mark}{shown}")
    return f"_Done: {', '.join(parts)}._"
