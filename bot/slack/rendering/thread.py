"""The Slack calls of one thread's renderer: each made under the delivery lease, patient with
rate limits, and able to find a message whose answer was lost.

A renderer never guesses whether a call it could not hear back from took effect: a posted
message carries its post key in its metadata, and a lost post is looked for in the thread (or
the channel's top level) before it is sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.calls import RateLimited, Refused, TokenGone, Uncertain, bot_identity, call
from bot.slack.rendering.lease import DeliveryLease
from bot.slack.rendering.parts import Target, metadata_for
from storage.delivery.store import DeliveryStore, Post, PostUpdate

log = logging.getLogger(__name__)
T = TypeVar("T")

PAGE_SIZE = 200  # Slack's advice for paginated reads: no more than 200 per page
RETIRED = "token_retired"
"""`TokenGone.code` when this process retired the client's token itself (`SlackClients.usable`):
nothing was sent."""


class SlackThread:
    def __init__(
        self,
        *,
        key: str,
        target: Target,
        client: AsyncWebClient,
        delivery: DeliveryStore,
        lease: DeliveryLease,
        usable: Callable[[], bool] = lambda: True,
    ) -> None:
        """`usable`: whether `client`'s token still speaks for the workspace
        (`SlackClients.usable`); asked before every call."""
        self.key = key
        self.target = target
        self.client = client
        self.delivery = delivery
        self.lease = lease
        self.usable = usable

    async def guard(self, method: str) -> None:
        """Before every Slack call: the delivery lease is still ours (`DeliveryLease.fence`)
        and the token still good. Once the workspace removed the app, the process that heard
        it makes no call with its token, not even the one a turn's next token was waiting for
        (`TokenGone`, code `RETIRED`)."""
        await self.lease.fence()
        if not self.usable():
            raise TokenGone(method, RETIRED)

    async def patient(self, method: str, send: Callable[[], Awaitable[T]]) -> T:
        """Wait out rate limits (the work stays queued), as long as Slack's `Retry-After`
        says; other failures propagate. Every attempt is made under `guard`."""
        while True:
            await self.guard(method)
            try:
                return await call(method, send)
            except RateLimited as limited:
                log.warning(
                    "rate limited; backing off",
                    extra={"method": limited.method, "retry_after": limited.retry_after},
                )
                await asyncio.sleep(max(limited.retry_after, 0.2))

    async def send_post(self, post: Post) -> str:
        """Post a whole message once: an uncertain outcome is settled by its metadata key."""
        thread_ts, blocks, text = post.thread_ts, post.body.blocks, post.body.prompt or ""
        try:
            response = await self.patient(
                "chat.postMessage",
                lambda: call(
                    "chat.postMessage",
                    lambda: self.client.chat_postMessage(
                        channel=post.channel,
                        thread_ts=thread_ts,
                        text=text or "…",
                        blocks=blocks,
                        metadata=metadata_for(post.post_key),
                    ),
                ),
            )
            ts = str(response["ts"])
        except Uncertain:
            found = await self.find_posted(post.post_key, since=post.opened_at)
            if found is None:
                return await self.send_post(post)
            ts = found
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, ts=ts, state="closed"), time.time()
        )
        return ts

    async def find_posted(
        self, post_key: str, *, since: float = 0.0, streamed: bool = False
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
        me = None
        if streamed:
            await self.guard("auth.test")
            me = await bot_identity(self.client)
        unclaimed: list[str] = []
        async for message in self._messages(since):
            ts = str(message.get("ts", ""))
            metadata = message.get("metadata") or {}
            if (metadata.get("event_payload") or {}).get("post_key") == post_key:
                return ts
            ours = me is not None and (
                message.get("bot_id") == me.bot_id or message.get("user") == me.user_id
            )
            if ours and not metadata and ts not in claimed and ts != self.target.thread_ts:
                unclaimed.append(ts)
        return max(unclaimed, key=float) if unclaimed else None

    async def _messages(self, since: float) -> AsyncIterator[dict[str, Any]]:
        """Every message of the thread (or the channel's top level), page by page: a long
        thread does not fit in one answer, and Slack may answer fewer than `limit` anyway."""
        target = self.target
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
            response = await self.patient(method, page)
            for message in response.get("messages") or []:
                yield message
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not response.get("has_more") or not cursor:
                return

    async def stop_stream(self, channel: str, ts: str) -> None:
        with contextlib.suppress(Refused, Uncertain):
            await self.patient(
                "chat.stopStream",
                lambda: call(
                    "chat.stopStream", lambda: self.client.chat_stopStream(channel=channel, ts=ts)
                ),
            )

    async def delete(self, post_key: str, ts: str) -> None:
        channel = self.target.channel
        with contextlib.suppress(Refused, Uncertain):
            await self.patient(
                "chat.delete",
                lambda: call(
                    "chat.delete", lambda: self.client.chat_delete(channel=channel, ts=ts)
                ),
            )
        await self.delivery.update_post(
            PostUpdate(post_key=post_key, ts=ts, state="deleted"), time.time()
        )
