"""A turn's reply as Slack messages: opened, streamed (or posted and edited), rolled over before
Slack ends a stream, taken over by edits when a stream stops accepting appends, and closed.

One message of the thread is written at a time (the current turn's `TurnView.part`). What each
message shows is collected as it changes, and the renderer saves it with the cursor of the events
it shows, so a restart can put every open message back to its saved body.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.calls import RateLimited, Refused, StreamGone, Uncertain, Unreachable, call
from bot.slack.rendering.lease import RenderSettings
from bot.slack.rendering.parts import (
    STATUS_TASK,
    PartContent,
    ReplyPart,
    StreamPart,
    Target,
    UpdatePart,
)
from bot.slack.rendering.thread import SlackThread
from storage.delivery.bodies import PostBody
from storage.delivery.store import DeliveryStore, Post, PostUpdate

log = logging.getLogger(__name__)


@dataclass
class TurnView:
    turn_id: str
    part: ReplyPart | None = None
    step_live: str = ""
    live_open: bool = True
    shown_any: bool = False
    running: dict[str, str] = field(default_factory=dict)
    """Titles of the tool calls announced and not yet ended, by call id: a batch's calls run
    side by side, so the status line names one still running until the last ends."""


def shows_nothing(content: PartContent) -> bool:
    """No words and no step of the timeline (a "working on it" status is not one)."""
    return not content.shown.strip() and set(content.tasks) <= {STATUS_TASK}


class ReplyWriter:
    def __init__(
        self,
        *,
        key: str,
        target: Target,
        client: AsyncWebClient,
        delivery: DeliveryStore,
        slack: SlackThread,
        settings: RenderSettings,
        clock: Callable[[], float],
    ) -> None:
        self.key = key
        self.target = target
        self.client = client
        self.delivery = delivery
        self.slack = slack
        self.settings = settings
        self.clock = clock
        self.view: TurnView | None = None
        self.streaming = target.thread_ts is not None
        self._changes: dict[str, PostUpdate] = {}
        self._last_flush = 0.0
        self.provisional: str | None = None
        """The post key of a message recovery continues although its saved body is empty: the
        log after the cursor fills it again, and if it fills it with nothing it is deleted."""

    def take_changes(self) -> list[PostUpdate]:
        """What the messages written since the last call show now, for the renderer's save."""
        changes = list(self._changes.values())
        self._changes = {}
        return changes

    def saved_body(self, post: Post) -> PostBody:
        """What `post` shows as of now: its body in this batch's changes if it changed since
        the last save (not yet in the store), else the stored one."""
        change = self._changes.get(post.post_key)
        return change.body if change is not None and change.body is not None else post.body

    def keep(self, post_key: str, body: PostBody) -> None:
        """Save a message's new body with the batch (an edit made outside its own part)."""
        change = self._changes.get(post_key)
        state = change.state if change is not None else None
        mode = change.mode if change is not None else None
        self._changes[post_key] = PostUpdate(post_key=post_key, body=body, state=state, mode=mode)

    @property
    def part_open(self) -> bool:
        return self.view is not None and self.view.part is not None

    @property
    def dirty(self) -> bool:
        return self.view is not None and self.view.part is not None and self.view.part.dirty

    async def view_for(self, turn_id: str) -> TurnView:
        """The turn's view; a new turn closes the message the previous one left open."""
        if self.view is not None and self.view.turn_id == turn_id:
            return self.view
        if self.view is not None and self.view.part is not None:
            await self.close(self.view, None)
        self.view = TurnView(turn_id=turn_id)
        return self.view

    async def part(self, view: TurnView) -> ReplyPart:
        """The turn's message being written; a new one after a park, a rollover or a restart."""
        if view.part is not None:
            return view.part
        parts = await self.delivery.posts(self.key, turn_id=view.turn_id, kind="reply")
        key = f"{self.key}|{view.turn_id}|reply|{len(parts)}"
        part: ReplyPart
        if self.streaming:
            part = StreamPart(self.client, self.target, key, clock=self.clock)
        else:
            part = UpdatePart(
                self.client,
                self.target,
                key,
                clock=self.clock,
                min_interval=self.settings.flush_interval,
            )
        await self.delivery.begin_post(
            Post(
                post_key=key,
                session_key=self.key,
                turn_id=view.turn_id,
                kind="reply",
                part=len(parts),
                channel=self.target.channel,
                thread_ts=self.target.thread_ts,
                mode=part.mode,
                opened_at=self.clock(),
            ),
            time.time(),
        )
        view.part = part
        view.shown_any = True
        return part

    async def close(
        self,
        view: TurnView,
        footer: str | None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        session_status: str | None = None,
    ) -> bool:
        """Finish the turn's open message. `blocks` go below its last words (a final answer's
        feedback buttons); `session_status` is set by the stream's stop where it ends in one.
        Returns whether it did (the caller sets it otherwise)."""
        current = view.part
        view.part = None
        view.step_live = ""
        if current is None:
            return False
        if current.post_key == self.provisional:
            self.provisional = None
            if current.ts is not None and not footer and shows_nothing(current.content):
                await self.slack.delete(current.post_key, current.ts)
                return False
        if current.ts is None and not current.dirty and not footer:
            await self.delivery.update_post(
                PostUpdate(post_key=current.post_key, state="empty"), time.time()
            )
            return False
        if self._expired(current) and (current.dirty or footer):
            # The last words of a long turn go to a new message, not to an expired stream.
            chunks, _ = current.take_pending()
            await self._finish(current, None)
            taken = current.taken
            current = await self.part(view)
            current.adopt(chunks, taken)
            view.part = None
        return await self._finish(current, footer, blocks=blocks, session_status=session_status)

    def _expired(self, part: ReplyPart) -> bool:
        return (
            part.ts is not None
            and part.mode == "stream"
            and part.age() > self.settings.stream_max_age
        )

    async def _finish(
        self,
        current: ReplyPart,
        footer: str | None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        session_status: str | None = None,
    ) -> bool:
        part = await self._flush(current, roll=False)
        try:
            said = await self.slack.patient(
                "close", lambda: part.close(footer, blocks=blocks, session_status=session_status)
            )
        except (StreamGone, Uncertain):
            taken = await self._take_over(part)
            said = await self.slack.patient(
                "close", lambda: taken.close(footer, blocks=blocks, session_status=session_status)
            )
            part = taken
        self._changes[part.post_key] = PostUpdate(
            post_key=part.post_key, body=part.content.body(), state="closed", mode=part.mode
        )
        return said

    async def flush_if_due(self) -> None:
        part = self.view.part if self.view is not None else None
        if part is None or not part.dirty:
            return
        size = sum(len(getattr(c, "text", "") or "") for c in part.pending)
        due = self.clock() - self._last_flush >= self.settings.flush_interval
        if size >= self.settings.flush_chars or due:
            await self._flush(part)

    async def flush_current(self) -> None:
        if self.view is not None and self.view.part is not None:
            await self._flush(self.view.part)

    async def _flush(self, part: ReplyPart, *, roll: bool = True) -> ReplyPart:
        """Send what is pending; returns the part now carrying the reply (it may have changed:
        a rollover, a refused stream, a stream Slack stopped accepting)."""
        view = self.view
        if part.ts is None:
            part = await self._open(part)
        elif roll and self._expired(part) and view is not None and view.part is part:
            part = await self._roll_over(view, part)
            if part.ts is None:
                part = await self._open(part)
        try:
            await self.slack.patient("flush", lambda: part.flush())
        except (StreamGone, Uncertain):
            part = await self._take_over(part)
        self._last_flush = self.clock()
        self._changes[part.post_key] = PostUpdate(post_key=part.post_key, body=part.content.body())
        return part

    def _replace(self, old: ReplyPart, new: ReplyPart) -> None:
        if self.view is not None and self.view.part is old:
            self.view.part = new

    async def _open(self, part: ReplyPart) -> ReplyPart:
        try:
            ts = await self.slack.patient("open", part.open)
        except Refused as refused:
            if not isinstance(part, StreamPart) or isinstance(refused, Unreachable):
                raise
            log.info("streaming refused; posting and editing instead", extra={"code": refused.code})
            self.streaming = False
            replacement = UpdatePart(
                part.client,
                part.target,
                part.post_key,
                clock=part.clock,
                content=part.content,
                min_interval=self.settings.flush_interval,
            )
            replacement.pending = part.pending
            self._replace(part, replacement)
            part = replacement
            ts = await self.slack.patient("open", part.open)
        except Uncertain:
            found = await self.slack.find_posted(
                part.post_key, since=part.opened_at, streamed=isinstance(part, StreamPart)
            )
            if found is None:
                ts = await self.slack.patient("open", part.open)
            else:
                part.ts = ts = found
                part = await self._take_over(part)
        await self.delivery.update_post(
            PostUpdate(post_key=part.post_key, ts=ts, state="open", mode=part.mode), time.time()
        )
        return part

    async def _take_over(self, part: ReplyPart) -> ReplyPart:
        """The stream stopped accepting appends: keep going in the same message by editing it."""
        if part.mode == "stream" and part.ts:
            ts = part.ts
            await self.slack.guard("chat.stopStream")
            with contextlib.suppress(Refused, Uncertain, RateLimited):
                await call(
                    "chat.stopStream",
                    lambda: self.client.chat_stopStream(channel=self.target.channel, ts=ts),
                )
        taken = UpdatePart.take_over(part, self.settings.flush_interval)
        await self.slack.patient("chat.update", lambda: taken.flush(force=True))
        self._replace(part, taken)
        await self.delivery.update_post(
            PostUpdate(post_key=part.post_key, mode="update"), time.time()
        )
        return taken

    async def _roll_over(self, view: TurnView, part: ReplyPart) -> ReplyPart:
        """Slack ends a stream about five minutes in: finish this message, continue in a new one."""
        chunks, _ = part.take_pending()
        view.part = None
        await self._finish(part, None)
        fresh = await self.part(view)
        fresh.adopt(chunks, part.taken)
        return fresh

    # after a crash -------------------------------------------------------------------------

    async def restore(self, post: Post, ts: str) -> UpdatePart:
        """The open message as its saved body says, ready to be edited on.

        A message whose saved body shows nothing was opened after the last save: the log after
        the cursor fills it again (the first edit rewrites it whole), so it keeps its place in
        the thread, above whatever the dead renderer posted after it. It is deleted only if
        those events leave it empty (`close`)."""
        content = PartContent.from_body(post.body)
        await self.slack.stop_stream(post.channel, ts)
        part = UpdatePart(
            self.client,
            self.target,
            post.post_key,
            clock=self.clock,
            content=content,
            min_interval=self.settings.flush_interval,
        )
        if shows_nothing(content):
            self.provisional = post.post_key
        else:
            await self.slack.patient("chat.update", lambda: part.repair(ts))
        part.ts = ts
        part.opened_at = post.opened_at
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, ts=ts, state="open", mode=part.mode), time.time()
        )
        return part

    async def close_restored(self, post: Post, part: UpdatePart) -> None:
        if part.post_key == self.provisional and part.ts is not None:
            self.provisional = None
            await self.slack.delete(part.post_key, part.ts)
            return
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, body=part.content.body(), state="closed"),
            time.time(),
        )
