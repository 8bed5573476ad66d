"""From a signed Slack event to an attested turn: which messages start a turn, on which session,
under which turn id.

The turn id is the message's identity (`<team>:<channel>:<ts>`), so Slack's retries and the twin
`message` + `app_mention` events of one message name the same turn, and the store's unique key
dedupes them durably, across restarts, with no cache in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeGuard

from agent import InboundEvent, Speaker
from bot.slack.identity import is_slack_id as is_slack_id
from bot.slack.identity import workspace_of

SOURCE = "slack"
# Subtypes that are still a person writing; every other subtype (edits, deletions, joins, bot
# posts) starts no turn.
PERSON_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
_TS = re.compile(r"[0-9]{1,12}\.[0-9]{1,12}")
"""A message timestamp, `1700000000.000100`: the message's id within its channel."""
_CHANNEL_TYPE = re.compile(r"[a-z_]{1,32}")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


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
    """The message in an event envelope if a person wrote it (not a bot, an edit or a deletion).

    Its ids and timestamps become the session key, the turn id and where replies go, and are
    stored as they are; one that Slack would never send (see `_ID`, `_TS`) means no message.
    Its text is the person's words: whatever cannot be stored is replaced (`clean_text`), not
    refused, since refusing would fail Slack's every retry and lose the message.
    """
    event = body.get("event")
    if not isinstance(event, dict) or event.get("type") not in ("message", "app_mention"):
        return None
    subtype = event.get("subtype")
    if not (subtype is None or isinstance(subtype, str)) or subtype not in PERSON_SUBTYPES:
        return None
    if event.get("bot_id"):
        return None
    # The workspace the event was sent for (its installation's, `bot.slack.identity`): in a channel
    # shared between workspaces the envelope's `team_id` may be the author's instead.
    place = workspace_of(body)
    team = place.team or event.get("team")
    user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
    thread_ts = event.get("thread_ts") or None
    enterprise = place.enterprise
    text = event.get("text") or ""
    if not (_is_id(team) and _is_id(channel) and _is_id(user) and _is_ts(ts)):
        return None
    if body.get("team_id") is not None and not _is_id(body["team_id"]):
        return None  # an envelope Slack never sends, whichever workspace it is for
    if thread_ts is not None and not _is_ts(thread_ts):
        return None
    if enterprise is not None and not _is_id(enterprise):
        return None
    if not isinstance(text, str) or user == bot_user_id:
        return None
    text = clean_text(text)
    mention = f"<@{bot_user_id}>" if bot_user_id else None
    mentions_bot = event.get("type") == "app_mention" or bool(mention and mention in text)
    if mention:
        text = text.replace(mention, "")
    channel_type = event.get("channel_type")
    return SlackMessage(
        team=team,
        enterprise=enterprise,
        channel=channel,
        ts=ts,
        thread_ts=thread_ts or ts,
        user=user,
        text=text.strip(),
        channel_type=channel_type if _is_channel_type(channel_type) else None,
        mentions_bot=mentions_bot,
        in_thread=bool(thread_ts and thread_ts != ts),
        raw=event,
    )


def clean_text(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD.

    A JSON `\\ud800` escape decodes to half a surrogate pair, which UTF-8 cannot encode, so no
    database (nor the model's API) takes it; a whole pair was already joined by the parser.
    """
    return _SURROGATE.sub("\ufffd", text)


def is_slack_ts(value: object) -> TypeGuard[str]:
    """A message timestamp (see `_TS`)."""
    return isinstance(value, str) and _TS.fullmatch(value) is not None


_is_id = is_slack_id
_is_ts = is_slack_ts


def _is_channel_type(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and _CHANNEL_TYPE.fullmatch(value) is not None
