"""One Slack message of a reply: streamed (chat streaming) or, where streaming is refused, posted
and then edited with throttled `chat.update`.

Every way of showing a reply speaks one dialect, standard Markdown (`markdown_text`, as streams
do): an edit that sent `text` alone would leave a streamed message's blocks in place, changing
nothing a person sees, and Slack's older `mrkdwn` would show the model's Markdown literally.
A reply's tool calls are task cards however it is shown (`bot.slack.rendering.content`).

A part keeps what it has shown (`shown`), how much of that is durable (`durable`: backed by
committed events, or final because the part was closed) and the timeline of tool calls. Only the
durable body is saved; after a crash a part is put back to exactly that body, so text typed live
for a step that never committed cannot end up shown twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.messages.chunk import Chunk, MarkdownTextChunk, TaskUpdateChunk
from slack_sdk.web.async_chat_stream import AsyncChatStream
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.calls import call
from bot.slack.rendering.content import (
    CHUNK_FIELDS,
    MAX_OUTPUT,
    STATUS_TASK,
    TASK_MARKS,
    PartContent,
    chunk_for,
    message_body,
)

__all__ = [
    "STATUS_TASK",
    "TASK_MARKS",
    "PartContent",
    "ReplyPart",
    "StreamPart",
    "Target",
    "UpdatePart",
    "metadata_for",
]
"""(`STATUS_TASK`, `TASK_MARKS` and `PartContent` live in `bot.slack.rendering.content`.)"""


@dataclass
class Target:
    """Where a reply goes; `thread_ts` is None for a proactive post at the top of a channel."""

    team: str
    channel: str
    thread_ts: str | None
    user_id: str | None = None


def metadata_for(post_key: str) -> dict[str, Any]:
    return {"event_type": "agent_reply", "event_payload": {"post_key": post_key}}


class ReplyPart:
    """Base: content bookkeeping shared by both ways of showing a reply."""

    mode = "stream"

    def __init__(
        self,
        client: AsyncWebClient,
        target: Target,
        post_key: str,
        *,
        clock: Callable[[], float] = time.time,
        content: PartContent | None = None,
    ) -> None:
        self.client = client
        self.target = target
        self.post_key = post_key
        self.clock = clock
        self.content = content or PartContent()
        self.ts: str | None = None
        self.opened_at = clock()
        self.pending: list[Chunk] = []
        self.stale = False
        """The message must be rewritten whole (it no longer matches what was sent)."""
        self.closed = False
        self.taken: dict[str, dict[str, Any]] = {}
        """The task entries the last `take_pending` handed on (for `adopt`)."""

    # content -------------------------------------------------------------------------------

    def add_text(self, text: str) -> None:
        """Queue text in order with task updates (consecutive text merges into one chunk)."""
        if not self.content.shown:
            text = text.lstrip("\n")
        if not text:
            return
        self.content.shown += text
        last = self.pending[-1] if self.pending else None
        if isinstance(last, MarkdownTextChunk):
            last.text += text
        else:
            self.pending.append(MarkdownTextChunk(text=text))

    def separate(self) -> None:
        """Start a new paragraph if this part already shows text."""
        if self.content.shown and not self.content.shown.endswith("\n"):
            self.add_text("\n\n")

    def drop_pending_live(self, live: str) -> bool:
        """Take back live text not yet sent (a retried model call voided it); False if sent."""
        last = self.pending[-1] if self.pending else None
        if live and isinstance(last, MarkdownTextChunk) and last.text.endswith(live):
            last.text = last.text[: -len(live)]
            self.content.shown = self.content.shown[: -len(live)]
            return True
        return not live

    def mark_durable(self) -> None:
        self.content.durable = len(self.content.shown)

    def task(
        self, task_id: str, title: str, status: str, output: str | None = None, **notes: Any
    ) -> None:
        """Show a tool call's state (`notes`: kept with it, never sent; None drops one)."""
        entry: dict[str, Any] = {"id": task_id, "title": title, "status": status}
        if output:
            entry["output"] = output[:MAX_OUTPUT]
        previous = self.content.tasks.get(task_id, {})
        kept = {k: v for k, v in previous.items() if k not in CHUNK_FIELDS}
        kept.update(notes)
        entry.update({k: v for k, v in kept.items() if v is not None})
        self.content.tasks[task_id] = entry
        self.pending.append(chunk_for(entry))

    def progress(self, task_id: str, title: str, status: str, details: str) -> None:
        """Show the model's progress as a card's `details` (`bot.slack.rendering.progress`). It is
        replaced as it grows, so a newer state of the card still unsent takes the older one's
        place instead of queueing a chunk per word."""
        entry = {"id": task_id, "title": title, "status": status, "progress": True}
        entry["details"] = details[:MAX_OUTPUT]
        self.content.tasks[task_id] = entry
        chunk = chunk_for(entry)
        last = self.pending[-1] if self.pending else None
        if isinstance(last, TaskUpdateChunk) and last.id == task_id:
            self.pending[-1] = chunk
        else:
            self.pending.append(chunk)

    def take_pending(self) -> tuple[list[Chunk], str]:
        """Hand what is not sent yet to the next part (a rollover), with its text."""
        chunks, self.pending = self.pending, []
        text = "".join(c.text for c in chunks if isinstance(c, MarkdownTextChunk))
        if text:
            self.content.shown = self.content.shown[: len(self.content.shown) - len(text)]
        self.taken = {}
        for chunk in chunks:
            if isinstance(chunk, TaskUpdateChunk) and chunk.id in self.content.tasks:
                self.taken[chunk.id] = self.content.tasks.pop(chunk.id)
        return chunks, text

    def adopt(self, chunks: list[Chunk], taken: dict[str, dict[str, Any]] | None = None) -> None:
        """Take over chunks another part had not sent (`take_pending`), with their notes."""
        for chunk in chunks:
            if isinstance(chunk, MarkdownTextChunk):
                self.add_text(chunk.text)
            elif isinstance(chunk, TaskUpdateChunk):
                notes = {
                    k: v
                    for k, v in (taken or {}).get(chunk.id, {}).items()
                    if k not in CHUNK_FIELDS
                }
                if chunk.details:
                    notes["details"] = chunk.details
                self.task(chunk.id, chunk.title, chunk.status, chunk.output, **notes)

    @property
    def dirty(self) -> bool:
        return bool(self.pending or self.stale)

    def age(self) -> float:
        return self.clock() - self.opened_at

    def end_unfinished_tasks(self, why: str) -> None:
        """A turn that ended (stopped, superseded, failed) leaves calls that never ran or never
        reported: shown as not run, never as still running in a reply that has ended. A call
        that returned only after the turn was asked to stop (`cut`) says it was stopped."""
        for task_id, task in list(self.content.tasks.items()):
            if task_id == STATUS_TASK or task.get("waits") or task.get("progress"):
                continue  # a request's own line says how it ended (`bot.slack.rendering.waiting`)
            if task.get("status") in ("in_progress", "pending"):
                self.task(task_id, task["title"], "error", f"not run: {why}")
            elif task.get("cut"):
                self.task(task_id, task["title"], "error", why)

    def finish_status_task(self) -> None:
        status = self.content.tasks.get(STATUS_TASK)
        if status is not None and status["status"] == "in_progress":
            self.task(STATUS_TASK, status["title"], "complete")

    # Slack ---------------------------------------------------------------------------------

    async def open(self) -> str:
        raise NotImplementedError

    async def flush(self, *, force: bool = False) -> None:
        raise NotImplementedError

    async def close(
        self,
        footer: str | None = None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        session_status: str | None = None,
    ) -> bool:
        """Finish the message: `blocks` go below its text (feedback buttons), and a stream's
        stop also sets the agent session's `session_status`. True if it did."""
        raise NotImplementedError

    async def repair(self, ts: str) -> None:
        """Make the message show exactly the durable body (after a crash or a lost append)."""
        shown = message_body(PartContent.from_body(self.content.body()))
        await call(
            "chat.update",
            lambda: self.client.chat_update(channel=self.target.channel, ts=ts, **shown),
        )


class StreamPart(ReplyPart):
    mode = "stream"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stream: AsyncChatStream | None = None

    async def _stream(self) -> AsyncChatStream:
        if self.stream is None:
            assert self.target.thread_ts is not None, "Slack streams only into a thread"
            self.stream = await self.client.chat_stream(
                channel=self.target.channel,
                thread_ts=self.target.thread_ts,
                recipient_team_id=self.target.team if self.target.user_id else None,
                recipient_user_id=self.target.user_id,
                task_display_mode="timeline",
                # Chunks are flushed by the renderer (size or time); the helper must not hold any.
                # No metadata here: chat.startStream takes none (it goes on at chat.stopStream),
                # so a stream whose start answer was lost is found another way (`find_posted`).
                buffer_size=1_000_000,
            )
        return self.stream

    def _chunks(self) -> list[Chunk]:
        return [c for c in self.pending if not isinstance(c, MarkdownTextChunk) or c.text]

    async def open(self) -> str:
        """Start the stream with whatever is pending (the first chunk creates the message)."""
        stream = await self._stream()
        if not self._chunks():
            self.task(STATUS_TASK, "Working on it", "in_progress")
        chunks = self._chunks()
        await call("chat.startStream", lambda: stream.append(chunks=chunks))
        self.pending = []
        self.ts = stream.ts
        assert self.ts is not None
        return self.ts

    async def flush(self, *, force: bool = False) -> None:
        if not self.dirty:
            return
        chunks = self._chunks()
        if not chunks:
            # Only text a retried model call took back (now empty): an append needs content.
            self.pending = []
            return
        stream = await self._stream()
        await call("chat.appendStream", lambda: stream.append(chunks=chunks))
        self.pending = []

    async def close(
        self,
        footer: str | None = None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        session_status: str | None = None,
    ) -> bool:
        """`blocks` are "rendered at the bottom of the finalized message" and `session_status`
        is "the session status to set after stopping the stream" (chat.stopStream,
        https://docs.slack.dev/reference/methods/chat.stopStream)."""
        self.finish_status_task()
        if footer:
            self.content.footer = footer
            gap = "\n\n" if self.content.shown and not self.content.shown.endswith("\n") else ""
            self.pending.append(MarkdownTextChunk(text=gap + footer))
        self.content.blocks = list(blocks or [])
        stream = await self._stream()
        chunks = self._chunks()
        await call(
            "chat.stopStream",
            lambda: stream.stop(
                chunks=chunks,
                metadata=metadata_for(self.post_key),
                blocks=blocks,
                session_status=session_status,
            ),
        )
        self.pending = []
        self.mark_durable()
        self.closed = True
        return session_status is not None


class UpdatePart(ReplyPart):
    """Post once, then edit: for top-level posts and wherever streaming is refused."""

    mode = "update"

    def __init__(self, *args: Any, min_interval: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.min_interval = min_interval
        self.last_update = 0.0

    async def open(self) -> str:
        shown = message_body(self.content)
        response = await call(
            "chat.postMessage",
            lambda: self.client.chat_postMessage(
                channel=self.target.channel,
                thread_ts=self.target.thread_ts,
                metadata=metadata_for(self.post_key),
                **shown,
            ),
        )
        self.pending = []
        self.ts = str(response["ts"])
        self.last_update = self.clock()
        return self.ts

    async def flush(self, *, force: bool = False) -> None:
        if not self.dirty:
            return
        if not force and self.clock() - self.last_update < self.min_interval:
            return
        await self._update(self.content)

    async def _update(self, content: PartContent) -> None:
        """The message shows `content` (`message_body`: `markdown_text` takes no blocks beside
        it, so a message with task cards or buttons is a `markdown` block above them)."""
        ts = self.ts
        assert ts is not None
        shown = message_body(content)
        await call(
            "chat.update",
            lambda: self.client.chat_update(channel=self.target.channel, ts=ts, **shown),
        )
        self.pending = []
        self.stale = False
        self.last_update = self.clock()

    async def close(
        self,
        footer: str | None = None,
        *,
        blocks: list[dict[str, Any]] | None = None,
        session_status: str | None = None,
    ) -> bool:
        self.finish_status_task()
        closing = PartContent(
            shown=self.content.shown,
            durable=self.content.durable,
            tasks=self.content.tasks,
            footer=footer or "",
            blocks=list(blocks or []),
        )
        await self._update(closing)
        self.content.footer, self.content.blocks = closing.footer, closing.blocks
        self.mark_durable()
        self.closed = True
        return False

    @classmethod
    def take_over(cls, part: ReplyPart, min_interval: float) -> UpdatePart:
        """Continue a stream Slack no longer accepts by editing the same message."""
        other = cls(
            part.client,
            part.target,
            part.post_key,
            clock=part.clock,
            content=part.content,
            min_interval=min_interval,
        )
        other.ts = part.ts
        other.opened_at = part.opened_at
        other.pending = list(part.pending)
        other.stale = True
        return other
