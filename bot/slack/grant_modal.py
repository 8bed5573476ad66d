"""Approve & allow again: the modal an "Approve & allow again" click opens, and what its
submission asks of the engine (`agent.AllowAgain`).

A proposed write of a tool that allows standing grants (`@tool(grantable_for=seconds)`; the
`confirmation.requested` event says so with `grantable_for`) gets a third button. Its click
opens this modal (with the click's trigger, as the Deny modal is opened, `bot.slack.deny_modal`,
whose sealed `private_metadata` it reuses: the submission is bound to the person who clicked and
the request they clicked): where the approval holds again (this thread, or this channel) and for
how long. Only the usual spans up to the tool's limit are offered, and the limit itself when it
is not one of them; the engine checks the limit again (a longer span is refused with 422, which
the modal shows as its field's error, nothing applied).

The narrowest choice is preselected (this thread, the shortest span): a person who submits
without looking gives away as little as the form lets them.
"""

from __future__ import annotations

import math
from typing import Any

from agent import AllowAgain, GrantScope

ALLOW_AGAIN_MODAL = "agent_allow_again"
"""The modal's `callback_id`."""
SCOPE_BLOCK, SCOPE_ACTION = "grant_scope", "scope"
SPAN_BLOCK, SPAN_ACTION = "grant_span", "span"
HOUR, DAY = 3_600, 86_400
USUAL_SPANS = (HOUR, 8 * HOUR, DAY, 7 * DAY, 30 * DAY)
"""What the duration menu offers, of those the tool allows."""
SCOPES = {GrantScope.THREAD: "This thread", GrantScope.CHANNEL: "This channel"}


def span_text(seconds: float) -> str:
    """ "1 hour", "8 hours", "1 day", "90 minutes": a span as a person says it."""
    for unit, size in (("day", DAY), ("hour", HOUR), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


def spans_for(grantable_for: float) -> list[float]:
    """The spans the menu offers: the usual ones the tool allows, and its limit itself when it
    is not one of them (so the longest span allowed can always be chosen), shortest first."""
    spans: list[float] = [float(s) for s in USUAL_SPANS if s <= grantable_for]
    if grantable_for not in spans:
        spans.append(float(grantable_for))
    return sorted(spans)


def where_text(scope: GrantScope) -> str:
    return "in this thread" if scope == GrantScope.THREAD else "in this channel"


def allowed_again_text(allow: AllowAgain) -> str:
    """What the request's message adds to its verdict: "in this thread for 1 day"."""
    return f"{where_text(allow.scope)} for {span_text(allow.seconds)}"


def _value(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def _option(text: str, value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text}, "value": value}


def grant_modal(prompt: str, metadata: str, grantable_for: float) -> dict[str, Any]:
    """The modal: the request, where it holds again, and for how long."""
    shown = prompt if len(prompt) <= 2900 else prompt[:2900] + "…"
    scopes = [_option(text, scope.value) for scope, text in SCOPES.items()]
    spans = [_option(span_text(s), _value(s)) for s in spans_for(grantable_for)]
    return {
        "type": "modal",
        "callback_id": ALLOW_AGAIN_MODAL,
        "title": {"type": "plain_text", "text": "Approve & allow again"},
        "submit": {"type": "plain_text", "text": "Approve"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": metadata,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"🙋 {shown}"}},
            {
                "type": "input",
                "block_id": SCOPE_BLOCK,
                "label": {"type": "plain_text", "text": "Allow it again without asking in"},
                "element": {
                    "type": "radio_buttons",
                    "action_id": SCOPE_ACTION,
                    "options": scopes,
                    "initial_option": scopes[0],
                },
            },
            {
                "type": "input",
                "block_id": SPAN_BLOCK,
                "label": {"type": "plain_text", "text": "For"},
                "element": {
                    "type": "static_select",
                    "action_id": SPAN_ACTION,
                    "placeholder": {"type": "plain_text", "text": "How long"},
                    "options": spans,
                    "initial_option": spans[0],
                },
            },
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": (
                            "Later calls of this tool for the same person run without asking "
                            "until then. You can revoke it any time in my Home tab."
                        ),
                    }
                ],
            },
        ],
    }


def _selected(view: dict[str, Any], block_id: str, action_id: str) -> str | None:
    state = view.get("state")
    values = state.get("values") if isinstance(state, dict) else None
    block = values.get(block_id) if isinstance(values, dict) else None
    field = block.get(action_id) if isinstance(block, dict) else None
    option = field.get("selected_option") if isinstance(field, dict) else None
    value = option.get("value") if isinstance(option, dict) else None
    return value if isinstance(value, str) else None


def allow_again_of(view: dict[str, Any]) -> AllowAgain | dict[str, str]:
    """What the person chose, from `view.state.values`; or, for a field that holds nothing
    usable, the errors to show on it (`response_action: errors`)."""
    errors: dict[str, str] = {}
    scope_value = _selected(view, SCOPE_BLOCK, SCOPE_ACTION)
    scope = next((s for s in GrantScope if s.value == scope_value), None)
    if scope is None:
        errors[SCOPE_BLOCK] = "Choose where to allow it again."
    span_value = _selected(view, SPAN_BLOCK, SPAN_ACTION)
    try:
        seconds = float(span_value) if span_value is not None else math.nan
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        errors[SPAN_BLOCK] = "Choose for how long."
    if errors or scope is None:
        return errors
    return AllowAgain(scope=scope, seconds=seconds)
