"""From a signed Slack event to an attested turn: which messages start a turn, on which session,
under which turn id.

The turn id is the message's identity (`<team>:<channel>:<ts>`), so Slack's retries and the twin
`message` + `app_mention` events of one message name the same turn, and the store's unique key
dedupes them durably, across restarts, with no cache in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from agent import InboundEvent, Speaker

SOURCE = "slack"
# Subtypes that are still a person writing; every other subtype (edits, deletions, joins, bot
# posts) starts no turn.
PERSON_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})


def session_key(team: str, channel: str, thread_ts: str) -> str:
    return f"slack:{team}:{channel}:{thread_ts}"


def parse_session_key(key: str) -> tuple[str, str, str | None]:
    """(team, channel, thread_ts or None); a proactive session's key has no thread."""
    parts = key.split(":", 3)
    if len(parts) < 3 or parts[0] != "slack":
        raise ValueError(f"not a Slack session key: {key!r}")
    thread = parts[3] if len(parts) == 4 and re.fullmatch(r"\d+\.\d+", parts[3]) else None
    return parts[1], parts[2], thread


def turn_id_for(team: str, channel: str, ts: str) -> str:
    return f"{team}:{channel}:{ts}"


@dataclass(frozen=True, kw_only=True)
class SlackMessage:
    """A person's message that may start a turn, with everything the renderer needs."""

    team: str
    enterprise: str | None
    channel: str
    ts: str
    thread_ts: str
    user: str
    text: str
    channel_type: str | None
    mentions_bot: bool
    in_thread: bool
    raw: dict[str, Any]

    @property
    def session_key(self) -> str:
        return session_key(self.team, self.channel, self.thread_ts)

    @property
    def turn_id(self) -> str:
        return turn_id_for(self.team, self.channel, self.ts)

    @property
    def is_dm(self) -> bool:
        return self.channel_type == "im" or self.channel.startswith("D")

    def inbound(self) -> InboundEvent:
        """The speaker is attested: Bolt checked the request's signature before we got here."""
        return InboundEvent(
            source=SOURCE,
            text=self.text,
            user=Speaker(id=self.user, attested=True),
            context={
                "team": self.team,
                "enterprise": self.enterprise,
                "channel": self.channel,
                "thread_ts": self.thread_ts,
                "ts": self.ts,
                "channel_type": self.channel_type,
            },
            raw=self.raw,
        )


def person_message(body: dict[str, Any], bot_user_id: str | None) -> SlackMessage | None:
    """The message in an event envelope if a person wrote it (not a bot, an edit or a deletion)."""
    event = body.get("event") or {}
    if event.get("type") not in ("message", "app_mention"):
        return None
    if event.get("subtype") not in PERSON_SUBTYPES or event.get("bot_id"):
        return None
    user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
    team = body.get("team_id") or event.get("team")
    if not (user and channel and ts and team) or user == bot_user_id:
        return None
    text = str(event.get("text") or "")
    mention = f"<@{bot_user_id}>" if bot_user_id else None
    mentions_bot = event.get("type") == "app_mention" or bool(mention and mention in text)
    if mention:
        text = text.replace(mention, "")
    thread_ts = event.get("thread_ts")
    return SlackMessage(
        team=str(team),
        enterprise=body.get("enterprise_id") or None,
        channel=str(channel),
        ts=str(ts),
        thread_ts=str(thread_ts or ts),
        user=str(user),
        text=text.strip(),
        channel_type=event.get("channel_type"),
        mentions_bot=mentions_bot,
        in_thread=bool(thread_ts and thread_ts != ts),
        raw=event,
    )
