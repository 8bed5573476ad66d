"""What the thread shows of a turn's state, the Slack way: the agent session's status, and the
status line with its loading messages.

- The agent session (https://docs.slack.dev/ai/agent-sessions,
  https://docs.slack.dev/reference/methods/agents.sessions.setStatus) is `processing` while a
  turn runs (Slack shows its Stop button then), `suspended` while it waits for a person, and
  `active` once the reply ended (stopped, failed or done: the conversation stays open). The first
  `setStatus` creates the session, with the title taken from the thread's first message. Where
  the reply ends in a stream, its `chat.stopStream(session_status="active")` says so in the same
  call (https://docs.slack.dev/reference/methods/chat.stopStream).
- The status line under the thread (`assistant.threads.setStatus`,
  https://docs.slack.dev/reference/methods/assistant.threads.setStatus) says once what the bot
  is doing: "is working on it…", or "is running lookup order…" while a tool runs. Slack shows
  `status` after the bot's name ("Status of the specified bot user, e.g. 'is thinking...'") and
  rotates `loading_messages` as a loading indicator; a single loading message saying the same
  again made the line read "agent is working on it… Working on it…", so none is sent. Cleared
  when the turn parks or ends.

Where Slack refuses either (an app not declared an agent, a conversation it takes no status in,
a top-level post with no thread), the renderer stops asking for that one; with neither, the
reply shows a first "Working on it" step in its timeline instead.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Literal

from bot.slack.calls import Refused, Uncertain
from bot.slack.rendering.parts import Target
from bot.slack.rendering.thread import SlackThread

log = logging.getLogger(__name__)

STATUS_TEXT = "is working on it…"
MAX_TITLE = 200  # agents.sessions.setStatus: "Title for the agent session (max 200 characters)"
MISSING_STOP = "missing_agent_session_stopped_event_subscription"
SessionStatus = Literal["active", "processing", "suspended", "closed"]
_warned: set[str] = set()
"""Slack warnings already logged by this process (one line each, not one per turn)."""


def session_title(text: str) -> str | None:
    """A thread's title from its first message: its first line, at most 200 characters."""
    line = " ".join(text.split())
    if not line:
        return None
    return line if len(line) <= MAX_TITLE else line[: MAX_TITLE - 1] + "…"


class ThreadStatus:
    def __init__(self, slack: SlackThread, target: Target) -> None:
        self.slack = slack
        self.target = target
        threaded = target.thread_ts is not None
        self.session_allowed: bool | None = None if threaded else False
        """None until Slack answered once; False where it keeps no agent session for us."""
        self.line_allowed: bool | None = None if threaded else False
        self.session: SessionStatus | None = None
        """The status last set on the agent session by this renderer."""
        self.doing: str | None = None
        """The status last shown on the status line (None: no line)."""

    @property
    def shown(self) -> bool:
        """Does Slack show this turn's progress (a session or a status line)?"""
        return self.session == "processing" or self.doing is not None

    async def processing(self, *, title: str | None = None, tool: str | None = None) -> bool:
        """The turn is running (`tool`: the title of the tool it runs now, if one runs); False
        where Slack shows nothing."""
        if self.session != "processing":
            await self._session("processing", title=title)
        doing = STATUS_TEXT if tool is None else f"is running {tool.lower()}…"
        if doing != self.doing:
            await self._line(doing)
        return self.shown

    async def suspended(self) -> None:
        """Parked for a person: the session says so and the status line goes."""
        await self._clear_line()
        if self.session != "suspended":
            await self._session("suspended")

    async def ended(self, *, said_by_stream: bool = False) -> None:
        """The reply ended; `said_by_stream`: its last stream stopped with the session status
        already (`chat.stopStream(session_status=...)`)."""
        await self._clear_line()
        if said_by_stream:
            self.session = "active"
        elif self.session != "active":
            await self._session("active")

    def stream_closing_status(self) -> SessionStatus | None:
        """The session status a stream stopping now should carry, or None."""
        return "active" if self.session_allowed and self.session != "active" else None

    # Slack ---------------------------------------------------------------------------------

    async def _session(self, status: SessionStatus, *, title: str | None = None) -> None:
        thread_ts = self.target.thread_ts
        if self.session_allowed is False or not thread_ts:
            return
        extra: dict[str, Any] = {}
        if title:
            extra["title"] = title
        if self.target.user_id and status == "processing":
            extra["initiator_user_id"] = self.target.user_id
        try:
            answer = await self.slack.patient(
                "agents.sessions.setStatus",
                lambda: self.slack.client.agents_sessions_setStatus(
                    channel_id=self.target.channel, thread_ts=thread_ts, status=status, **extra
                ),
            )
        except Refused as refused:
            log.info("no agent session here", extra={"code": refused.code})
            self.session_allowed = False
            return
        except Uncertain:
            return  # the next change of state says it again
        self.session_allowed = True
        self.session = status
        _log_warnings(answer)

    async def _line(self, doing: str) -> None:
        thread_ts = self.target.thread_ts
        if self.line_allowed is False or not thread_ts:
            return
        try:
            await self.slack.patient(
                "assistant.threads.setStatus",
                lambda: self.slack.client.assistant_threads_setStatus(
                    channel_id=self.target.channel,
                    thread_ts=thread_ts,
                    status=doing,
                ),
            )
        except (Refused, Uncertain):
            self.line_allowed = False
            return
        self.line_allowed = True
        self.doing = doing

    async def _clear_line(self) -> None:
        thread_ts = self.target.thread_ts
        if self.doing is None or not thread_ts:
            return
        self.doing = None
        with contextlib.suppress(Refused, Uncertain):
            await self.slack.patient(
                "assistant.threads.setStatus",
                lambda: self.slack.client.assistant_threads_setStatus(
                    channel_id=self.target.channel, thread_ts=thread_ts, status=""
                ),
            )


def _log_warnings(answer: Any) -> None:
    """Say once per process what Slack warns about; the missing Stop subscription means people
    see no Stop button (https://docs.slack.dev/reference/events/agent_session_stopped)."""
    metadata = answer.get("response_metadata") if hasattr(answer, "get") else None
    warnings = (metadata or {}).get("warnings") or []
    for warning in warnings:
        if warning in _warned:
            continue
        _warned.add(str(warning))
        if warning == MISSING_STOP:
            log.warning(
                "the Slack app is not subscribed to agent_session_stopped: nobody sees a Stop "
                "button (add it to the manifest's bot_events)"
            )
        else:
            log.warning("Slack warns about agent sessions", extra={"warning": str(warning)})
