"""Server-sent events: a `Feed` written as `text/event-stream`.

Each durable event is a frame with `id: <seq>`, so a client that reconnects sends the last one
it saw as `Last-Event-ID` and gets exactly what followed; a live delta has no `id` (it is not
in the log: a reconnect could not ask for it again) and says `"live": true` in its data. An
idle stream gets a `: ping` comment every `heartbeat` seconds, so proxies keep it open. The
stream ends when the client goes away (Starlette cancels it; the feed's subscription goes with
it), when `until` says the event just sent was the last one wanted, or when the API closes: the
server is stopping, and the last frame is `event: closing` (the reason, and the `last_seq` sent),
so the reader knows to reconnect with `Last-Event-ID`, to this process's successor or another.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from agent import TurnEvent
from bot.api.feed import Feed

EventJson = Callable[[TurnEvent], dict[str, Any]]
RETRY_MS = 2000
"""What a browser's `EventSource` waits before it reconnects."""
CLOSING = "the server is shutting down; reconnect with Last-Event-ID to go on from here"


def frame(data: dict[str, Any], *, event: str, seq: int | None = None) -> str:
    head = f"id: {seq}\n" if seq else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


async def stream(
    feed: Feed,
    *,
    to_json: EventJson,
    heartbeat: float,
    poll: float,
    open_: Callable[[], bool],
    wanted: Callable[[TurnEvent], bool] = lambda _: True,
    until: Callable[[TurnEvent], Awaitable[bool]] | None = None,
    done: Callable[[], Awaitable[bool]] | None = None,
    ending: Callable[[], Awaitable[str]] | None = None,
) -> AsyncIterator[str]:
    """The frames of `feed`: the log after its cursor, then live. `wanted` picks the events
    written (the others still move the cursor). The stream ends, after the frame `ending`
    makes, once `until` says so of a durable event just written, or once `done` (asked when
    a poll found nothing new) says so, after what the log holds by then is written."""
    async with feed:
        yield f"retry: {RETRY_MS}\n\n"
        beat = time.monotonic()
        batch = await feed.catch_up()
        while open_():
            # One write per batch: a reconnect's catch-up of hundreds of events is one chunk,
            # not hundreds.
            written: list[str] = []
            for event in batch:
                if not wanted(event):
                    continue
                written.append(frame(to_json(event), event=event.type, seq=event.seq or None))
                if event.seq and until is not None and await until(event):
                    if ending is not None:
                        written.append(await ending())
                    yield "".join(written)
                    return
            if time.monotonic() - beat >= heartbeat:
                written.append(": ping\n\n")
                beat = time.monotonic()
            if written:
                yield "".join(written)
            batch = await feed.next(min(poll, heartbeat))
            if not batch and done is not None and await done():
                last = [
                    frame(to_json(event), event=event.type, seq=event.seq or None)
                    for event in await feed.catch_up()
                    if wanted(event)
                ]
                if ending is not None:
                    last.append(await ending())
                yield "".join(last)
                return
        yield frame({"reason": CLOSING, "last_seq": feed.cursor}, event="closing")
