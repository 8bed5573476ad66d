"""The thread's status line ("is working on it…") while a turn runs, the Slack way.

Slack shows an app's status under the thread (`assistant.threads.setStatus`) where the app may
set one; where it may not (refused once), the renderer stops asking and the reply shows a first
"Working on it" step in its timeline instead.
"""

from __future__ import annotations

import contextlib

from bot.rendering.parts import Target
from bot.rendering.thread import SlackThread
from bot.slack_calls import Refused, Uncertain

STATUS_TEXT = "is working on it…"


class ThreadStatus:
    def __init__(self, slack: SlackThread, target: Target) -> None:
        self.slack = slack
        self.target = target
        self.allowed: bool | None = None if target.thread_ts else False
        """None until Slack answered once; a top-level post has no thread to show it under."""

    async def show(self) -> bool:
        """Set the status; False where Slack does not let this app set one here."""
        thread_ts = self.target.thread_ts
        if self.allowed is False or not thread_ts:
            return False
        try:
            await self.slack.patient(
                "assistant.threads.setStatus",
                lambda: self.slack.client.assistant_threads_setStatus(
                    channel_id=self.target.channel, thread_ts=thread_ts, status=STATUS_TEXT
                ),
            )
        except (Refused, Uncertain):
            self.allowed = False
            return False
        self.allowed = True
        return True

    async def clear(self) -> None:
        thread_ts = self.target.thread_ts
        if not thread_ts:
            return
        with contextlib.suppress(Refused, Uncertain):
            await self.slack.patient(
                "assistant.threads.setStatus",
                lambda: self.slack.client.assistant_threads_setStatus(
                    channel_id=self.target.channel, thread_ts=thread_ts, status=""
                ),
            )
