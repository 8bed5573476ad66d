"""The stand-in's memory: messages per channel, streams in progress, every call made, and the
faults queued for the next calls. Pure data, no HTTP, so tests can inspect it directly."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bot.testing.blocks import tasks_shown

STREAM_ERROR = "message_not_in_streaming_state"


@dataclass
class Call:
    method: str
    args: dict[str, Any]
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0
    verb: str = "POST"
    team: str | None = None
    """The workspace of the token that made the call (installs in many workspaces only)."""


@dataclass
class Fault:
    """What the next matching call gets instead of a normal answer."""

    method: str
    kind: str  # ratelimited | server_error | hang | not_in_streaming_state | error:<code>
    times: int = 1
    retry_after: int = 1
    applied: bool = False
    """For server_error: do the work before failing (the uncertain case)."""


@dataclass
class AgentSession:
    """An agent session Slack keeps for one thread (https://docs.slack.dev/ai/agent-sessions):
    created by the first `agents.sessions.setStatus`, which alone sets its title and initiator."""

    channel: str
    thread_ts: str
    status: str
    title: str | None = None
    initiator: str | None = None
    history: list[str] = field(default_factory=list)
    """Every status it was given, in order (by `setStatus` or `chat.stopStream`)."""


@dataclass
class View:
    """A published Home tab or an opened modal, as Slack stores it."""

    id: str
    type: str
    user: str
    body: dict[str, Any]
    hash: str

    def to_json(self, team_id: str, app_id: str, bot_id: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "team_id": team_id,
            "type": self.type,
            "blocks": self.body.get("blocks", []),
            "private_metadata": self.body.get("private_metadata", ""),
            "callback_id": self.body.get("callback_id", ""),
            "hash": self.hash,
            "title": self.body.get("title"),
            "close": self.body.get("close"),
            "submit": self.body.get("submit"),
            "clear_on_close": False,
            "notify_on_close": False,
            "external_id": "",
            "root_view_id": self.id,
            "previous_view_id": None,
            "app_id": app_id,
            "app_installed_team_id": team_id,
            "bot_id": bot_id,
        }


@dataclass
class Trigger:
    """A `trigger_id` Slack handed out with an interaction: good for one `views.open`, within
    three seconds (https://docs.slack.dev/interactivity/handling-user-interaction)."""

    id: str
    user: str
    issued_at: float
    used: bool = False


@dataclass
class Message:
    channel: str
    ts: str
    text: str = ""
    user: str | None = None
    bot_id: str | None = None
    thread_ts: str | None = None
    blocks: list[Any] | None = None
    metadata: dict[str, Any] | None = None
    fallback: str | None = None
    """The `text` argument of an update that could not change what the message shows (its
    blocks or streamed content stay, as Slack keeps them): notification text only."""
    streamed: bool = False
    """Created by `chat.startStream`: what it shows is its streamed content, not `text`."""
    streaming: bool = False
    stream_started: float = 0.0
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    edited: int = 0
    deleted: bool = False

    def to_json(self, *, with_metadata: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.fallback or self.text}
        if self.user:
            out["user"] = self.user
        if self.bot_id:
            out["bot_id"] = self.bot_id
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if self.blocks is not None:
            out["blocks"] = self.blocks
        if with_metadata and self.metadata is not None:
            out["metadata"] = self.metadata
        return out


class Workspace:
    def __init__(
        self,
        *,
        team_id: str,
        bot_user_id: str,
        bot_id: str,
        clock: Callable[[], float] = time.time,
        stream_max_age: float | None = None,
    ) -> None:
        self.team_id = team_id
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.clock = clock
        self.stream_max_age = stream_max_age
        self.calls: list[Call] = []
        self.messages: dict[str, list[Message]] = {}
        self.ephemerals: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.statuses: list[dict[str, Any]] = []
        self.faults: list[Fault] = []
        self.sessions: dict[tuple[str, str], AgentSession] = {}
        self.suggested_prompts: list[dict[str, Any]] = []
        self.titles: list[dict[str, Any]] = []
        self.home_views: dict[str, View] = {}
        """The Home tab each user sees, by user id."""
        self.modals: list[View] = []
        self.triggers: dict[str, Trigger] = {}
        self._view_ids = itertools.count(1)
        self._ts = itertools.count(1)
        self._base = int(time.time())

    # time stamps ---------------------------------------------------------------------------

    def next_ts(self) -> str:
        return f"{self._base}.{next(self._ts):06d}"

    def next_view_id(self) -> str:
        return f"V{next(self._view_ids):08d}"

    # interactions ---------------------------------------------------------------------------

    def issue_trigger(self, trigger_id: str, user: str) -> None:
        """Slack hands out a trigger with each click, shortcut or command (the driver calls it)."""
        self.triggers[trigger_id] = Trigger(id=trigger_id, user=user, issued_at=self.clock())

    def session_of(self, channel: str, thread_ts: str) -> AgentSession | None:
        return self.sessions.get((channel, thread_ts))

    # faults --------------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        kind: str,
        *,
        times: int = 1,
        retry_after: int = 1,
        applied: bool = False,
    ) -> None:
        self.faults.append(Fault(method, kind, times, retry_after, applied))

    def take_fault(self, method: str) -> Fault | None:
        for fault in self.faults:
            if fault.method in (method, "*") and fault.times > 0:
                fault.times -= 1
                return fault
        return None

    # messages ------------------------------------------------------------------------------

    def add(self, message: Message) -> Message:
        if message.blocks and not message.tasks:
            message.tasks = tasks_shown(message.blocks)  # a posted message's task cards
        self.messages.setdefault(message.channel, []).append(message)
        return message

    def find(self, channel: str, ts: str) -> Message | None:
        for message in self.messages.get(channel, []):
            if message.ts == ts and not message.deleted:
                return message
        return None

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        return [
            m
            for m in self.messages.get(channel, [])
            if not m.deleted and (m.ts == thread_ts or m.thread_ts == thread_ts)
        ]

    def top_level(self, channel: str) -> list[Message]:
        return [
            m
            for m in self.messages.get(channel, [])
            if not m.deleted and (m.thread_ts is None or m.thread_ts == m.ts)
        ]

    def bot_messages(self, channel: str | None = None) -> list[Message]:
        channels = [channel] if channel else list(self.messages)
        return [
            m
            for c in channels
            for m in self.messages.get(c, [])
            if m.bot_id == self.bot_id and not m.deleted
        ]

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def render_view(self, view: View, names: dict[str, str] | None = None) -> str:
        return render_view(view, names)

    def stream_expired(self, message: Message) -> bool:
        if not message.streaming:
            return True
        if self.stream_max_age is None:
            return False
        return self.clock() - message.stream_started > self.stream_max_age

    # a readable thread ---------------------------------------------------------------------

    def render_thread(
        self, channel: str, thread_ts: str, names: dict[str, str] | None = None
    ) -> str:
        names = names or {}
        lines: list[str] = []
        for message in self.thread(channel, thread_ts):
            who = "agent" if message.bot_id else names.get(message.user or "", message.user or "?")
            body = message.text or _blocks_text(message.blocks)
            lines.append(f"  {who:>8} │ " + body.replace("\n", "\n           │ "))
            for task in message.tasks.values():
                mark = {"complete": "✓", "error": "✗", "in_progress": "…"}.get(task["status"], "·")
                extra = f" — {task['output']}" if task.get("output") else ""
                lines.append(f"           │   {mark} {task['title']}{extra}")
            buttons = _buttons(message.blocks)
            if buttons:
                lines.append("           │   " + "  ".join(f"[{b}]" for b in buttons))
        return "\n".join(lines)


def render_view(view: View, names: dict[str, str] | None = None) -> str:
    """A Home tab or modal as a person reads it: its texts, and its buttons in brackets."""
    names = names or {}
    lines = [f"  ┌ {view.type} of {names.get(view.user, view.user)}"]
    for block in view.body.get("blocks", []):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "divider":
            lines.append("  │ ───")
            continue
        text = _blocks_text([block])
        for name, shown in names.items():
            text = text.replace(f"<@{name}>", f"@{shown}")
        if text:
            lines.append("  │ " + text.replace("\n", "\n  │ "))
        buttons = _buttons([block])
        if buttons:
            lines.append("  │   " + "  ".join(f"[{b}]" for b in buttons))
    return "\n".join(lines)


REPLY_BLOCKS = ("context_actions", "task_card")
"""Blocks only a reply carries: an answer's feedback buttons, a tool call's task card."""


def is_request(message: Message) -> bool:
    """The bot's own kind of message with blocks that are not a reply's (its task cards, an
    answer's feedback buttons): an approval request (with its buttons, or once settled,
    without them)."""
    blocks = message.blocks or []
    return bool(blocks) and not any(
        isinstance(b, dict) and b.get("type") in REPLY_BLOCKS for b in blocks
    )


def _blocks_text(blocks: list[Any] | None) -> str:
    parts: list[str] = []
    for block in blocks or []:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, dict) and text.get("text"):
            parts.append(str(text["text"]))
        elif isinstance(text, str) and text:
            parts.append(text)  # a `markdown` block
        for element in block.get("elements", []) if isinstance(block, dict) else []:
            if isinstance(element, dict) and element.get("type") in ("mrkdwn", "plain_text"):
                parts.append(str(element.get("text", "")))
    return "\n".join(parts)


def _buttons(blocks: list[Any] | None) -> list[str]:
    found: list[str] = []
    for block in blocks or []:
        if isinstance(block, dict) and block.get("type") == "actions":
            for element in block.get("elements", []):
                if element.get("type") == "button":
                    found.append(str(element.get("text", {}).get("text", "")))
        if isinstance(block, dict) and block.get("type") == "context_actions":
            for element in block.get("elements", []):
                for side in ("positive_button", "negative_button"):
                    found.append(str(element.get(side, {}).get("text", {}).get("text", "")))
    return found
