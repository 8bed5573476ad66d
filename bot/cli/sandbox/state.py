"""What the sandbox page shows, read off the stand-in: the page keeps no state of its own about
the conversation, so it shows what Slack would, and nothing the bot did not put there.

One viewer at a time (the "speak as" person): ephemerals, the Home tab and modals are per
person in Slack, so only the viewer's are included.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from bot.testing.standin import SlackStandIn
from bot.testing.workspace import Message, View


@dataclass(frozen=True, kw_only=True)
class Person:
    id: str
    name: str
    role: str
    """What the picker says of them (who asks, who may answer)."""


@dataclass(frozen=True, kw_only=True)
class Channel:
    id: str
    name: str


def snapshot(
    standin: SlackStandIn,
    *,
    viewer: str,
    people: Collection[Person],
    channels: Collection[Channel],
    dismissed: Collection[str],
) -> dict[str, Any]:
    """The page's JSON. `dismissed`: modal view ids the viewer submitted or closed (Slack's
    client closes a modal; the stand-in keeps every view it opened)."""
    return {
        "viewer": viewer,
        "bot_user": standin.bot_user_id,
        "team": standin.team_name,
        "people": [{"id": p.id, "name": p.name, "role": p.role} for p in people],
        "channels": [
            {
                "id": c.id,
                "name": c.name,
                "messages": [_message(m) for m in standin.messages.get(c.id, []) if not m.deleted],
            }
            for c in channels
        ],
        "ephemerals": [
            _ephemeral(n, e) for n, e in enumerate(standin.ephemerals) if e.get("user") == viewer
        ],
        "statuses": _statuses(standin),
        "sessions": {
            f"{channel}:{thread}": {"status": s.status, "title": s.title, "history": s.history}
            for (channel, thread), s in standin.sessions.items()
        },
        "home": _view(standin.home_views[viewer]) if viewer in standin.home_views else None,
        "modal": _modal(standin.modals, viewer, dismissed),
    }


def _message(message: Message) -> dict[str, Any]:
    return {
        "ts": message.ts,
        "thread_ts": message.thread_ts,
        "user": message.user,
        "bot": message.bot_id is not None,
        "text": message.text,
        "blocks": message.blocks or [],
        "tasks": list(message.tasks.values()),
        "streamed": message.streamed,
        "streaming": message.streaming,
        "edited": message.edited,
    }


def _ephemeral(index: int, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": index,
        "channel": args.get("channel"),
        "thread_ts": args.get("thread_ts") or None,
        "text": str(args.get("text") or ""),
        "blocks": args.get("blocks") or [],
    }


def _statuses(standin: SlackStandIn) -> dict[str, dict[str, Any]]:
    """Each thread's status line as it stands: the last `assistant.threads.setStatus` given
    for it (an empty status clears it)."""
    latest: dict[str, dict[str, Any]] = {}
    for status in standin.statuses:
        key = f"{status.get('channel_id')}:{status.get('thread_ts')}"
        latest[key] = {
            "status": str(status.get("status") or ""),
            "loading_messages": list(status.get("loading_messages") or []),
        }
    return latest


def _view(view: View) -> dict[str, Any]:
    body = view.body
    return {
        "id": view.id,
        "type": view.type,
        "blocks": body.get("blocks", []),
        "title": body.get("title"),
        "submit": body.get("submit"),
        "close": body.get("close"),
    }


def _modal(modals: list[View], viewer: str, dismissed: Collection[str]) -> dict[str, Any] | None:
    """The viewer's modal on top: the latest one opened for them and not yet closed."""
    for view in reversed(modals):
        if view.user == viewer:
            return None if view.id in dismissed else _view(view)
    return None
