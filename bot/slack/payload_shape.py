"""Signed payloads that Bolt or our listeners would crash on, told apart before Bolt runs.

Wherever a payload's `type` promises a field, Bolt indexes into it: `actions[0]`,
`event["type"]`, `view["type"]`, a `callback_id` matched against a pattern. It does so in its
middleware and in every listener matcher, for every request, so a payload of the right type with
the wrong shape fails each request as a 500, and Slack retries a 500. Slack never sends such a
payload; one that arrives signed means nothing, so it is answered 200 and ignored.

The rules are what the installed Bolt (`slack_bolt.request.payload_utils`, the built-in listener
matchers, `IgnoringSelfEvents`) and `bot.slack.clicks.Click.parse` read, and no more: a payload only
has to be what they take for granted. Fields Bolt reads to build a request's context are covered
differently (see `SlackBot.slack_events`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Payload = Mapping[str, Any]


def problem(payload: Payload) -> str | None:
    """Why Bolt or a listener could not handle this payload, or None. The reason names a field,
    never its value: it goes to the log, and the value is whatever the sender chose."""
    if "event" in payload:
        found = _event(payload["event"])
        if found:
            return found
    kind = payload.get("type")
    check = _BY_TYPE.get(kind) if isinstance(kind, str) else None
    found = check(payload) if check else None
    if found:
        return found
    if "command" in payload and not isinstance(payload.get("response_url"), str):
        return "a slash command without a response_url"
    return None


def _event(event: Any) -> str | None:
    # Bolt's middleware reads `body.get("event", {}).get(...)` on every request.
    if not isinstance(event, dict):
        return "`event` is not an object"
    if "type" in event and not isinstance(event["type"], str):
        return "`event.type` is not a string"
    return None


def _first_action(payload: Payload) -> str | None:
    actions = payload["actions"]
    if not isinstance(actions, list) or not actions:
        return "`actions` is not a non-empty list"
    action = actions[0]
    if not isinstance(action, dict) or not isinstance(action.get("action_id"), str):
        return "`actions[0]` has no string action_id"
    if not isinstance(action.get("value", ""), str):
        return "`actions[0].value` is not a string"
    return None


def _block_actions(payload: Payload) -> str | None:
    if "actions" not in payload:
        return None  # not an action to Bolt: no listener sees it
    found = _first_action(payload)
    if found:
        return found
    # `Click.parse` reads these as objects (`(body.get("team") or {}).get("id")`).
    if not isinstance(payload.get("user"), dict):
        return "`user` is not an object"
    for name in ("team", "enterprise", "container", "channel", "message"):
        if payload.get(name) is not None and not isinstance(payload[name], dict):
            return f"`{name}` is not an object"
    return None


def _callback_id(payload: Payload) -> str | None:
    if "callback_id" in payload and not isinstance(payload["callback_id"], str):
        return "`callback_id` is not a string"
    return None


def _message_action(payload: Payload) -> str | None:
    """A message shortcut: `bot.slack.resets` reads the message, where it is and who used it."""
    found = _callback_id(payload)
    if found:
        return found
    if "response_url" in payload and not isinstance(payload["response_url"], str):
        return "`response_url` is not a string"
    for name, key in (("message", "ts"), ("channel", "id"), ("user", "id")):
        value = payload.get(name)
        if not isinstance(value, dict) or not isinstance(value.get(key), str):
            return f"`{name}.{key}` is not a string"
    message = payload["message"]
    if message.get("thread_ts") is not None and not isinstance(message["thread_ts"], str):
        return "`message.thread_ts` is not a string"
    for name in ("team", "enterprise"):
        if payload.get(name) is not None and not isinstance(payload[name], dict):
            return f"`{name}` is not an object"
    return None


def _attachment_action(payload: Payload) -> str | None:
    if "callback_id" not in payload:
        return None
    return _callback_id(payload) or (
        _first_action(payload) if "actions" in payload else "no `actions`"
    )


def _workflow_step_edit(payload: Payload) -> str | None:
    found = _callback_id(payload)
    if found is None and "callback_id" in payload and "workflow_step" not in payload:
        return "no `workflow_step`"
    return found


def _view(payload: Payload) -> str | None:
    if "view" not in payload:
        return None
    view = payload["view"]
    if not isinstance(view, dict):
        return "`view` is not an object"
    if "callback_id" not in view or payload.get("type") != "view_submission":
        return None
    if "type" not in view:
        return "`view.type` is missing"
    if view["type"] == "workflow_step" and "workflow_step" not in payload:
        return "no `workflow_step`"
    return None


_BY_TYPE: dict[str, Callable[[Payload], str | None]] = {
    "block_actions": _block_actions,
    "interactive_message": _attachment_action,
    "message_action": _message_action,
    "dialog_submission": _callback_id,
    "dialog_cancellation": _callback_id,
    "workflow_step_edit": _workflow_step_edit,
    "view_submission": _view,
    "view_closed": _view,
}
