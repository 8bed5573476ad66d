"""Render one session's durable event log into its Slack thread.

The log decides what is shown; live `message.delta` events only let text appear early. Each batch
of durable events is applied to Slack and then saved (cursor + bodies of the messages it touched)
in one transaction, so after a crash the renderer puts every open message back to its saved body
and re-applies the events after the cursor: nothing committed is lost and nothing is shown twice.

A live delta that arrives before a durable event in the same batch is stale (the event that follows
it, a completed message or the turn's end, covers or voids it) and is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, assert_never

from slack_sdk.web.async_client import AsyncWebClient

from agent import Answerer, SessionStore, TurnEvent, TurnStatus
from bot.approvals import ApprovalRef, answered_message, approval_blocks, confirmation_prompt
from bot.reply_part import (
    STATUS_TASK,
    PartContent,
    ReplyPart,
    StreamPart,
    Target,
    UpdatePart,
    metadata_for,
)
from bot.slack_calls import RateLimited, Refused, StreamGone, Uncertain, bot_identity, call
from storage.delivery.store import DeliveryStore, Post, PostUpdate

log = logging.getLogger(__name__)
T = TypeVar("T")

FOOTERS = {
    "replaced": "_superseded by a newer message_",
    "reset": "_stopped: this conversation was reset_",
}
PAGE_SIZE = 200  # Slack's advice for paginated reads: no more than 200 per page
FAILED = ":warning: Sorry, something went wrong and I could not finish this reply."
STATUS_TEXT = "is working on it…"


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    stream_max_age: float = 270.0
    flush_interval: float = 1.0
    flush_chars: int = 400
    poll_interval: float = 1.0
    lease_ttl: float = 30.0


@dataclass
class TurnView:
    turn_id: str
    part: ReplyPart | None = None
    step_live: str = ""
    live_open: bool = True
    shown_any: bool = False
    status_set: bool = False


@dataclass
class _Batch:
    changes: dict[str, PostUpdate] = field(default_factory=dict)


class LeaseLost(Exception):
    """Another process took over rendering this session."""


class SessionRenderer:
    def __init__(
        self,
        *,
        key: str,
        target: Target,
        client: AsyncWebClient,
        store: SessionStore,
        delivery: DeliveryStore,
        queue: asyncio.Queue[tuple[TurnEvent, int | None]],
        settings: RenderSettings,
        owner: str,
        cursor: int = 0,
        clock: Callable[[], float] = time.time,
        leased_at: float | None = None,
    ) -> None:
        """`leased_at`: when (`time.monotonic()`, taken before the write) the caller acquired
        the session's delivery lease for this renderer; from then on every Slack call is made
        under the lease (`_fence`). None: the caller holds no lease (a one-off notice)."""
        self.key = key
        self.target = target
        self.client = client
        self.store = store
        self.delivery = delivery
        self.queue = queue
        self.settings = settings
        self.owner = owner
        self.cursor = cursor
        self.clock = clock
        self.view: TurnView | None = None
        self.streaming = target.thread_ts is not None
        self.status_ok: bool | None = None if target.thread_ts else False
        self._batch = _Batch()
        self._last_flush = 0.0
        self._fenced = leased_at is not None
        self._renewed = leased_at if leased_at is not None else 0.0
        self._provisional: str | None = None
        """The post key of a message recovery continues although its saved body is empty: the
        log after the cursor fills it again, and if it fills it with nothing it is deleted."""

    # main loop ------------------------------------------------------------------------------

    async def run(self, activity: int) -> None:
        """Render until the session is caught up with no turn left to run, then go idle."""
        await self.recover()
        while True:
            # The turns are read before the events: a turn that ends in between has committed its
            # last events with its end, so this catch-up still delivers them. The other way round,
            # a turn run whole between the two reads left the session idle, its reply unshown.
            done = self.queue.empty() and await self._finished()
            await self.catch_up()
            if done and self.queue.empty() and not self._part_open:
                if await self.delivery.go_idle(self.key, activity):
                    return
                target = await self.delivery.get_target(self.key)
                activity = target.activity if target else activity
            for event, horizon in await self._next_batch():
                if event.seq > 0:
                    if event.seq > self.cursor:
                        await self.catch_up()
                    continue
                # A delta is fresh only if no durable event emitted after it has been applied.
                if horizon is None:
                    continue
                if horizon > self.cursor:
                    await self.catch_up()
                if horizon < self.cursor:
                    continue
                await self.on_delta(event)
            await self._flush_if_due()
            await self._renew()

    async def _next_batch(self) -> list[tuple[TurnEvent, int | None]]:
        view = self.view
        dirty = view is not None and view.part is not None and view.part.dirty
        timeout = self.settings.flush_interval if dirty else self.settings.poll_interval
        batch: list[tuple[TurnEvent, int | None]] = []
        with contextlib.suppress(TimeoutError):
            batch.append(await asyncio.wait_for(self.queue.get(), timeout))
        while not self.queue.empty():
            batch.append(self.queue.get_nowait())
        return batch

    @property
    def _part_open(self) -> bool:
        return self.view is not None and self.view.part is not None

    async def _finished(self) -> bool:
        if self._part_open:
            return False
        turns = await self.store.list_turns(self.key)
        return not any(t.status in (TurnStatus.QUEUED, TurnStatus.RUNNING) for t in turns)

    async def _renew(self) -> None:
        """Keep the delivery lease: renewed once a third of its ttl has passed since the last
        renewal, timed from before that renewal's write (so this process never believes in more
        lease than it has). Raises `LeaseLost` when another process holds it."""
        began = time.monotonic()
        if began - self._renewed < self.settings.lease_ttl / 3:
            return
        if not await self.delivery.acquire(
            self.key, self.owner, self.settings.lease_ttl, time.time()
        ):
            raise LeaseLost(self.key)
        self._renewed = began

    async def _fence(self) -> None:
        """Before every Slack call: the lease is still ours, with at least two thirds of its ttl
        left, so no other process can start rendering this thread before the call lands.

        Renewing only between batches was not enough: a batch that took longer than the ttl (a
        long catch-up after a restart, a slow Slack, a starved machine) outlived the lease, the
        next worker's sweep took the thread over, and both rendered it at once: replies posted
        twice, messages closed at stale bodies."""
        if self._fenced:
            await self._renew()

    # durable events ----------------------------------------------------------------------------

    async def catch_up(self) -> None:
        while True:
            events = await self.store.read_events(self.key, self.cursor, 200)
            if not events:
                return
            for event in events:
                await self.apply(event)
                self.cursor = event.seq
            await self._flush_parts()
            await self._save()
            await self._show_answers()

    async def _show_answers(self) -> None:
        """Approvals answered while the click's process died before showing it. `recover` finds
        them when a renderer starts; a renderer still running when the answer committed (its
        wake absorbed) finds them here, once the answered turn's next events arrive."""
        for post in await self.delivery.posts(self.key, kind="approval", states=("answered",)):
            await self._show_answered(post)

    async def apply(self, event: TurnEvent) -> None:
        match event.type:
            case "turn.started":
                view = await self._view(event.turn_id)
                await self._show_status(view)
            case "message.completed":
                view = await self._view(event.turn_id)
                if event.text:
                    self._complete_step(await self._part(view), view, event.text)
                view.step_live = ""
            case "action.requested":
                view = await self._view(event.turn_id)
                part = await self._part(view)
                part.task(event.call.id, _title(event.call.name), "in_progress")
            case "action.completed":
                view = await self._view(event.turn_id)
                part = await self._part(view)
                status = "error" if event.error else "complete"
                part.task(
                    event.call_id, _title(event.name), status, "failed" if event.error else None
                )
            case "input.requested":
                view = await self._view(event.turn_id)
                request = event.request
                if view.part is not None and request.call_id:
                    title = _title(request.tool)
                    view.part.task(request.call_id, title, "pending", "waiting for approval")
                await self._close(view, None)
                ref = ApprovalRef(
                    kind="input",
                    session=self.key,
                    turn_id=event.turn_id,
                    ident=request.id,
                    digest=request.digest,
                )
                await self._post_approval(ref, request.prompt, request.answerers)
            case "confirmation.requested":
                view = await self._view(event.turn_id)
                await self._close(view, None)
                confirmation = event.confirmation
                ref = ApprovalRef(
                    kind="confirm",
                    session=self.key,
                    turn_id=event.turn_id,
                    ident=confirmation.id,
                )
                await self._post_approval(
                    ref, confirmation_prompt(confirmation), confirmation.answerers
                )
            case "confirmation.resolved":
                pass
            case "turn.completed":
                view = await self._view(event.turn_id)
                await self._end(view, None)
            case "turn.failed":
                view = await self._view(event.turn_id)
                # The error text was scrubbed of secrets when the engine stored it; operators
                # need it (e.g. "raise ANTHROPIC_MAX_TOKENS"); the thread gets the plain apology.
                log.warning(
                    "turn failed",
                    extra={"session": self.key, "turn": event.turn_id, "error": event.error},
                )
                await self._end(view, FAILED)
            case "turn.cancelled":
                view = await self._view(event.turn_id)
                footer = FOOTERS.get(event.reason, f"_cancelled ({event.reason})_")
                await self._end(view, footer if view.shown_any else None)
            case "message.delta":
                pass
            case _:
                assert_never(event.type)

    # live events ---------------------------------------------------------------------------

    async def on_delta(self, event: TurnEvent) -> None:
        if event.type != "message.delta":
            return
        view = self.view
        if view is None or view.turn_id != event.turn_id:
            view = await self._view(event.turn_id)
        if not view.live_open:
            return
        if event.restart:
            if view.part is not None:
                view.part.drop_pending_live(view.step_live)
            view.step_live = ""
            return
        if not event.text:
            return
        part = await self._part(view)
        if not view.step_live:
            part.separate()
        part.add_text(event.text)
        view.step_live += event.text

    def _complete_step(self, part: ReplyPart, view: TurnView, text: str) -> None:
        live = view.step_live
        if live and text.startswith(live):
            part.add_text(text[len(live) :])
        else:
            part.separate()
            part.add_text(text)
        part.mark_durable()

    # turns and parts -----------------------------------------------------------------------------

    async def _view(self, turn_id: str) -> TurnView:
        if self.view is not None and self.view.turn_id == turn_id:
            return self.view
        if self.view is not None and self.view.part is not None:
            await self._close(self.view, None)
        self.view = TurnView(turn_id=turn_id)
        return self.view

    async def _part(self, view: TurnView) -> ReplyPart:
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

    async def _show_status(self, view: TurnView) -> None:
        """Progress the Slack way: the thread's status where allowed, else a first task."""
        if self.status_ok is not False and self.target.thread_ts:
            thread_ts = self.target.thread_ts
            try:
                await self._patient(
                    "assistant.threads.setStatus",
                    lambda: self.client.assistant_threads_setStatus(
                        channel_id=self.target.channel, thread_ts=thread_ts, status=STATUS_TEXT
                    ),
                )
                self.status_ok = view.status_set = True
                return
            except (Refused, Uncertain):
                self.status_ok = False
        part = await self._part(view)
        if not part.content.tasks:
            part.task("status", "Working on it", "in_progress")

    async def _clear_status(self, view: TurnView) -> None:
        if not view.status_set or not self.target.thread_ts:
            return
        thread_ts = self.target.thread_ts
        with contextlib.suppress(Refused, Uncertain):
            await self._patient(
                "assistant.threads.setStatus",
                lambda: self.client.assistant_threads_setStatus(
                    channel_id=self.target.channel, thread_ts=thread_ts, status=""
                ),
            )
        view.status_set = False

    async def _end(self, view: TurnView, footer: str | None) -> None:
        if view.part is None and footer:
            await self._part(view)
        await self._close(view, footer)
        view.live_open = False
        await self._clear_status(view)

    async def _close(self, view: TurnView, footer: str | None) -> None:
        current = view.part
        view.part = None
        view.step_live = ""
        if current is None:
            return
        if current.post_key == self._provisional:
            self._provisional = None
            if current.ts is not None and not footer and _shows_nothing(current.content):
                await self._delete(current.post_key, current.ts)
                return
        if current.ts is None and not current.dirty and not footer:
            await self.delivery.update_post(
                PostUpdate(post_key=current.post_key, state="empty"), time.time()
            )
            return
        if self._expired(current) and (current.dirty or footer):
            # The last words of a long turn go to a new message, not to an expired stream.
            chunks, _ = current.take_pending()
            await self._finish(current, None)
            current = await self._part(view)
            current.adopt(chunks)
            view.part = None
        await self._finish(current, footer)

    def _expired(self, part: ReplyPart) -> bool:
        return (
            part.ts is not None
            and part.mode == "stream"
            and part.age() > self.settings.stream_max_age
        )

    async def _finish(self, current: ReplyPart, footer: str | None) -> None:
        part = await self._flush(current, roll=False)
        try:
            await self._patient("close", lambda: part.close(footer))
        except (StreamGone, Uncertain):
            taken = await self._take_over(part)
            await self._patient("close", lambda: taken.close(footer))
            part = taken
        self._batch.changes[part.post_key] = PostUpdate(
            post_key=part.post_key, body=part.content.body(), state="closed", mode=part.mode
        )

    # Slack ---------------------------------------------------------------------------------

    async def _patient(self, method: str, send: Callable[[], Awaitable[T]]) -> T:
        """Wait out rate limits (the work stays queued); other failures propagate. Every
        attempt is made under the lease (`_fence`)."""
        while True:
            await self._fence()
            try:
                return await call(method, send)
            except RateLimited as limited:
                log.warning(
                    "rate limited; backing off",
                    extra={"method": limited.method, "retry_after": limited.retry_after},
                )
                await asyncio.sleep(max(limited.retry_after, 0.2))

    async def _flush_if_due(self) -> None:
        part = self.view.part if self.view is not None else None
        if part is None or not part.dirty:
            return
        size = sum(len(getattr(c, "text", "") or "") for c in part.pending)
        due = self.clock() - self._last_flush >= self.settings.flush_interval
        if size >= self.settings.flush_chars or due:
            await self._flush(part)

    async def _flush_parts(self) -> None:
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
            await self._patient("flush", lambda: part.flush())
        except (StreamGone, Uncertain):
            part = await self._take_over(part)
        self._last_flush = self.clock()
        self._batch.changes[part.post_key] = PostUpdate(
            post_key=part.post_key, body=part.content.body()
        )
        return part

    def _replace(self, old: ReplyPart, new: ReplyPart) -> None:
        if self.view is not None and self.view.part is old:
            self.view.part = new

    async def _open(self, part: ReplyPart) -> ReplyPart:
        try:
            ts = await self._patient("open", part.open)
        except Refused as refused:
            if not isinstance(part, StreamPart):
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
            ts = await self._patient("open", part.open)
        except Uncertain:
            found = await self.find_posted(
                part.post_key,
                part.target,
                since=part.opened_at,
                streamed=isinstance(part, StreamPart),
            )
            if found is None:
                ts = await self._patient("open", part.open)
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
            await self._fence()
            with contextlib.suppress(Refused, Uncertain, RateLimited):
                await call(
                    "chat.stopStream",
                    lambda: self.client.chat_stopStream(channel=self.target.channel, ts=ts),
                )
        taken = UpdatePart.take_over(part, self.settings.flush_interval)
        await self._patient("chat.update", lambda: taken.flush(force=True))
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
        fresh = await self._part(view)
        fresh.adopt(chunks)
        return fresh

    async def _post_approval(
        self, ref: ApprovalRef, prompt: str, answerers: Answerer | None
    ) -> None:
        existing = await self.delivery.get_post(ref.post_key)
        if existing is not None and (existing.ts or existing.state != "posting"):
            return  # posted, or settled by whoever answered it: never a second request
        if existing is not None:
            # Begun by a renderer that died before Slack's answer: Slack may have it.
            found = await self.find_posted(existing.post_key, self.target, since=existing.opened_at)
            if found is not None:
                await self.delivery.update_post(
                    PostUpdate(post_key=existing.post_key, ts=found, state="closed"), time.time()
                )
                return
        blocks = approval_blocks(ref, prompt, answerers)
        post = Post(
            post_key=ref.post_key,
            session_key=self.key,
            turn_id=ref.turn_id,
            kind="approval",
            channel=self.target.channel,
            thread_ts=self.target.thread_ts,
            body={"prompt": prompt, "blocks": blocks},
            opened_at=self.clock(),
        )
        await self.delivery.begin_post(post, time.time())
        await self.send_post(post)

    async def send_post(self, post: Post) -> str:
        """Post a whole message once: an uncertain outcome is settled by its metadata key."""
        thread_ts, blocks, text = (
            post.thread_ts,
            post.body.get("blocks"),
            post.body.get("prompt", ""),
        )
        try:
            response = await self._patient(
                "chat.postMessage",
                lambda: call(
                    "chat.postMessage",
                    lambda: self.client.chat_postMessage(
                        channel=post.channel,
                        thread_ts=thread_ts,
                        text=str(text) or "…",
                        blocks=blocks,
                        metadata=metadata_for(post.post_key),
                    ),
                ),
            )
            ts = str(response["ts"])
        except Uncertain:
            found = await self.find_posted(post.post_key, self.target, since=post.opened_at)
            if found is None:
                return await self.send_post(post)
            ts = found
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, ts=ts, state="closed"), time.time()
        )
        return ts

    async def find_posted(
        self, post_key: str, target: Target, *, since: float = 0.0, streamed: bool = False
    ) -> str | None:
        """The ts of a post whose answer was lost, or None if Slack has no such message.

        A posted message carries `post_key` in its metadata. A stream cannot: chat.startStream
        takes no metadata (it is set when the stream stops). A lost stream start is instead the
        bot's own message in the thread that no post of this session claims and that carries no
        metadata: a thread's messages are posted one at a time by its one renderer, and every
        other message it posts is recorded with its ts or carries its key. Of several (a start
        lost twice), the newest is the one being looked for.
        """
        claimed = {post.ts for post in await self.delivery.posts(self.key) if post.ts}
        me = await bot_identity(self.client) if streamed else None
        unclaimed: list[str] = []
        async for message in self._messages(target, since):
            ts = str(message.get("ts", ""))
            metadata = message.get("metadata") or {}
            if (metadata.get("event_payload") or {}).get("post_key") == post_key:
                return ts
            ours = me is not None and (
                message.get("bot_id") == me.bot_id or message.get("user") == me.user_id
            )
            if ours and not metadata and ts not in claimed and ts != target.thread_ts:
                unclaimed.append(ts)
        return max(unclaimed, key=float) if unclaimed else None

    async def _messages(self, target: Target, since: float) -> AsyncIterator[dict[str, Any]]:
        """Every message of the thread (or the channel's top level), page by page: a long
        thread does not fit in one answer, and Slack may answer fewer than `limit` anyway."""
        cursor: str | None = None
        while True:
            if target.thread_ts:
                read = functools.partial(self.client.conversations_replies, ts=target.thread_ts)
                method = "conversations.replies"
            else:
                # A channel's history has no end: a top-level post is looked for in the hour
                # before it began (Slack's ts and this host's clock agree far better than that).
                oldest = f"{since - 3600:.6f}" if since > 3600 else None
                read = functools.partial(self.client.conversations_history, oldest=oldest)
                method = "conversations.history"
            page = functools.partial(
                read,
                channel=target.channel,
                include_all_metadata=True,
                limit=PAGE_SIZE,
                cursor=cursor,
            )
            response = await self._patient(method, page)
            for message in response.get("messages") or []:
                yield message
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not response.get("has_more") or not cursor:
                return

    async def _save(self) -> None:
        changes = list(self._batch.changes.values())
        self._batch = _Batch()
        await self.delivery.save(self.key, self.cursor, changes, time.time())

    # after a crash ---------------------------------------------------------------------------

    async def recover(self) -> None:
        """Settle what a previous renderer left half done, before reading any event.

        The reply a crash left open is put back to its saved body and the turn's reply goes on
        in that same message (edited from now on: its stream cannot be resumed), so a crash
        never splits one reply over two messages.

        Only one message is open when a batch is saved, so of several found open the first is
        the one the log after the cursor goes on in. The others were opened after that save
        (their saved bodies are empty) and the same events open them again, so they are
        deleted; kept, they would end the first message early, at its saved body, and send the
        rest of its reply to a new message below what the dead renderer had posted after it."""
        continued: tuple[Post, UpdatePart] | None = None
        for post in await self.delivery.posts(self.key, states=("posting", "open", "answered")):
            if post.state == "answered":
                await self._show_answered(post)
                continue
            ts = post.ts
            if post.state == "posting":
                ts = await self.find_posted(
                    post.post_key,
                    self.target,
                    since=post.opened_at,
                    streamed=post.kind == "reply" and post.mode == "stream",
                )
                if ts is None:
                    if post.kind == "reply":
                        await self.delivery.update_post(
                            PostUpdate(post_key=post.post_key, state="empty"), time.time()
                        )
                    else:
                        await self.send_post(post)
                    continue
            if post.kind != "reply" or ts is None:
                await self.delivery.update_post(
                    PostUpdate(post_key=post.post_key, ts=ts, state="closed"), time.time()
                )
                continue
            empty = _shows_nothing(PartContent.from_body(post.body))
            if continued is not None and empty:
                await self._stop_stream(post.channel, ts)
                await self._delete(post.post_key, ts)
                continue
            if continued is not None:
                await self._close_restored(*continued)
            continued = (post, await self._restore(post, ts))
        if continued is not None:
            post, part = continued
            self.view = TurnView(turn_id=post.turn_id, part=part, shown_any=True)

    async def _show_answered(self, post: Post) -> None:
        """An approval whose answer committed while the click's process died before it could
        show it: the message says who answered and loses its buttons."""
        if post.ts is not None:
            ts = post.ts
            text, blocks = answered_message(post.body)
            with contextlib.suppress(Refused, Uncertain):
                await self._patient(
                    "chat.update",
                    lambda: self.client.chat_update(
                        channel=post.channel, ts=ts, text=text, blocks=blocks
                    ),
                )
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, state="closed"), time.time()
        )

    async def _close_restored(self, post: Post, part: UpdatePart) -> None:
        if part.post_key == self._provisional and part.ts is not None:
            self._provisional = None
            await self._delete(part.post_key, part.ts)
            return
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, body=part.content.body(), state="closed"),
            time.time(),
        )

    async def _stop_stream(self, channel: str, ts: str) -> None:
        with contextlib.suppress(Refused, Uncertain):
            await self._patient(
                "chat.stopStream",
                lambda: call(
                    "chat.stopStream", lambda: self.client.chat_stopStream(channel=channel, ts=ts)
                ),
            )

    async def _delete(self, post_key: str, ts: str) -> None:
        channel = self.target.channel
        with contextlib.suppress(Refused, Uncertain):
            await self._patient(
                "chat.delete",
                lambda: call(
                    "chat.delete", lambda: self.client.chat_delete(channel=channel, ts=ts)
                ),
            )
        await self.delivery.update_post(
            PostUpdate(post_key=post_key, ts=ts, state="deleted"), time.time()
        )

    async def _restore(self, post: Post, ts: str) -> UpdatePart:
        """The open message as its saved body says, ready to be edited on.

        A message whose saved body shows nothing was opened after the last save: the log after
        the cursor fills it again (the first edit rewrites it whole), so it keeps its place in
        the thread, above whatever the dead renderer posted after it. It is deleted only if
        those events leave it empty (`_close`)."""
        content = PartContent.from_body(post.body)
        await self._stop_stream(post.channel, ts)
        part = UpdatePart(
            self.client,
            self.target,
            post.post_key,
            clock=self.clock,
            content=content,
            min_interval=self.settings.flush_interval,
        )
        if _shows_nothing(content):
            self._provisional = post.post_key
        else:
            await self._patient("chat.update", lambda: part.repair(ts))
        part.ts = ts
        part.opened_at = post.opened_at
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, ts=ts, state="open", mode=part.mode), time.time()
        )
        return part


def _shows_nothing(content: PartContent) -> bool:
    """No words and no step of the timeline (a "working on it" status is not one)."""
    return not content.shown.strip() and set(content.tasks) <= {STATUS_TASK}


def _title(name: str) -> str:
    return name.replace("_", " ").capitalize()
