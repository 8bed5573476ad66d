"""Deny with a reason: the small modal a Deny click opens, and how its submission is bound to
the click that opened it.

The modal is opened with the click's `trigger_id` (`views.open`,
https://docs.slack.dev/reference/methods/views.open: good for one call within three seconds)
and holds one optional text input. Its `private_metadata` (https://docs.slack.dev/reference/
views: at most 3,000 characters, returned with the submission) carries what the answer needs:
the button's `ApprovalRef`, who clicked (user, workspace, org) and where (the message, or the
Home tab), signed with an HMAC under the app's secret. A submission
(`view_submission`, https://docs.slack.dev/reference/interaction-payloads/
view-interactions-payload) is a signed Slack request; on top of that, metadata that does not
verify, or a submitter who is not the person who clicked, changes nothing. What the answer
does is then decided exactly as for a click (`bot.slack.approval_clicks`): the engine checks the
submitter against the request's answerers, the digest and the workspace again.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from dataclasses import dataclass
from typing import Any

from agent import Principal
from bot.slack.approval_blocks import ApprovalRef

DENY_REASON = "agent_deny_reason"
"""The modal's `callback_id`."""
REASON_BLOCK, REASON_ACTION = "reason", "text"
MAX_REASON = 500
MAX_AGE = 24 * 3600.0
"""A modal left open longer than this is not taken (its request has likely moved on)."""


@dataclass(frozen=True, kw_only=True)
class Opened:
    """The click a modal was opened for."""

    ref: ApprovalRef
    principal: Principal
    channel: str | None
    message_ts: str | None
    thread_ts: str | None
    home: bool
    opened_at: float


class ModalSeal:
    """Signs and checks a modal's `private_metadata` with a key only this app holds."""

    def __init__(self, secret: str) -> None:
        self._key = hmac.new(secret.encode(), b"bot.slack.deny_modal", hashlib.sha256).digest()

    def seal(self, opened: Opened) -> str:
        data = {
            "r": opened.ref.encode(),
            "p": dict(opened.principal),
            "c": opened.channel,
            "m": opened.message_ts,
            "t": opened.thread_ts,
            "h": opened.home,
            "at": opened.opened_at,
        }
        body = base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode())
        return f"{body.decode()}.{self._mac(body)}"

    def open(self, metadata: str, *, now: float | None = None) -> Opened | None:
        """The click the metadata was sealed for, or None if it was not sealed here, was
        changed, or is too old."""
        body, _, mac = metadata.rpartition(".")
        if not body or not hmac.compare_digest(mac, self._mac(body.encode())):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(body.encode()))
            opened = Opened(
                ref=ApprovalRef.decode(data["r"]),
                principal={
                    "team": data["p"].get("team"),
                    "enterprise": data["p"].get("enterprise"),
                    "user": data["p"].get("user"),
                },
                channel=data["c"],
                message_ts=data["m"],
                thread_ts=data["t"],
                home=bool(data["h"]),
                opened_at=float(data["at"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        if (now if now is not None else time.time()) - opened.opened_at > MAX_AGE:
            return None
        return opened

    def _mac(self, body: bytes) -> str:
        return hmac.new(self._key, body, hashlib.sha256).hexdigest()


def deny_modal(prompt: str, metadata: str) -> dict[str, Any]:
    """The modal: the request, and an optional reason the model and the thread will read."""
    shown = prompt if len(prompt) <= 2900 else prompt[:2900] + "…"
    return {
        "type": "modal",
        "callback_id": DENY_REASON,
        "title": {"type": "plain_text", "text": "Deny this request"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": metadata,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"🙋 {shown}"}},
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": "Why? (optional)"},
                "element": {
                    "type": "plain_text_input",
                    "action_id": REASON_ACTION,
                    "multiline": True,
                    "max_length": MAX_REASON,
                    "placeholder": {"type": "plain_text", "text": "The agent reads this."},
                },
            },
        ],
    }


def reason_of(view: dict[str, Any]) -> str | None:
    """What the person typed, from `view.state.values`; None when they left it empty."""
    state = view.get("state")
    values = state.get("values") if isinstance(state, dict) else None
    block = values.get(REASON_BLOCK) if isinstance(values, dict) else None
    field = block.get(REASON_ACTION) if isinstance(block, dict) else None
    text = field.get("value") if isinstance(field, dict) else None
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip()[:MAX_REASON]
