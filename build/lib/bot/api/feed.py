"""One session's events for one reader, from a cursor on: the durable log after it, then what
happens live, each durable event exactly once and in `seq` order.

The feed subscribes to the runtime's hub before it first reads the log (for a POST's stream,
before the turn is started), so nothing falls between the read and the subscription; a read
of the log stops short of the first event the hub has queued (that one and what follows come
from the queue, in order with the deltas between them), what both bring is dropped by `seq`,
and a gap (an event the hub never brought) is filled from the log. The hub is a speed-up,
never the record: the feed also reads the log every `poll` seconds when nothing arrives, which
is how a turn run by another process reaches a reader without Redis (and how an event Redis
dropped is found). With Redis the relay brings the other processes'
events live (`SlackBot` connects it).

Live `message.delta`s (and `progress.updated`s) are not in the log, so a reader that reconnects
never gets them again; a delta is sent only while the reader is at the place it was emitted
(its `after`, or for one emitted here the last durable event the hub brought before it): one
whose step has already committed, as far as this reader was sent, is dropped rather than shown
after its own `message.completed`.

The hub hands events over without waiting (`_on_event` only queues), so a slow reader never
slows a turn; a reader so slow that `MAX_QUEUED` events pile up loses the queue and reads the
log instead (deltas lost, nothing durable).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from types import TracebackType

from agent import AgentSession, MessageDelta, ProgressUpdated, TurnEvent

MAX_QUEUED = 10_000


class Feed:
    def __init__(self, session: AgentSession, *, after: int) -> None:
        self.session = session
        self.cursor = after
        """The seq of the last durable event handed to the reader."""
        self._queue: asyncio.Queue[tuple[TurnEvent, int | None]] = asyncio.Queue()
        self._live_seen: int | None = None
        """The seq of the last durable event the hub brought (None: none yet)."""
        self._queued: deque[int] = deque()
        """The seqs of the durable events in the queue, in order."""
        self._overflow = False
        self._unsubscribe: Callable[[], None] | None = None

    async def open(self) -> None:
        """Subscribe (once): before the turn to follow is started, so its first deltas are
        heard too, and before the log is first read."""
        if self._unsubscribe is None:
            self._unsubscribe = await self.session.observe(self._on_event)

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    async def __aenter__(self) -> Feed:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _on_event(self, event: TurnEvent) -> None:
        if event.seq:
            self._live_seen = max(self._live_seen or 0, event.seq)
            position = None
        elif isinstance(event, MessageDelta | ProgressUpdated) and event.after:
            position = event.after
        else:
            position = self._live_seen
        if self._queue.qsize() >= MAX_QUEUED:
            self._overflow = True
            self._queue = asyncio.Queue()
            self._queued.clear()
            return
        if event.seq:
            self._queued.append(event.seq)
        self._queue.put_nowait((event, position))

    async def catch_up(self) -> list[TurnEvent]:
        """The durable events after the cursor, from the log, up to the first one the queue
        holds: that one and what follows it come from the queue, in order with the deltas
        between them (read from the log too, those deltas would be behind the cursor)."""
        horizon = self._queued[0] if self._queued else None
        found = [
            e
            for e in await self.session.events(self.cursor)
            if e.seq > self.cursor and (horizon is None or e.seq < horizon)
        ]
        if found:
            self.cursor = found[-1].seq
        return found

    async def next(self, within: float) -> list[TurnEvent]:
        """What to send next, in order; [] when `within` seconds passed with nothing new, even
        in the log (a chance to send a heartbeat, or to stop)."""
        if self._overflow:
            self._overflow = False
            return await self.catch_up()
        try:
            # Not wait_for: on Python 3.11 it can swallow a cancellation that arrives as the
            # item does, and a stream being closed would then go on waiting.
            async with asyncio.timeout(within):
                event, position = await self._queue.get()
        except TimeoutError:
            return await self.catch_up()
        if event.seq:
            if self._queued and self._queued[0] == event.seq:
                self._queued.popleft()
            if event.seq <= self.cursor:
                return []
            if event.seq == self.cursor + 1:
                self.cursor = event.seq
                return [event]
            return await self.catch_up()
        return await self._live(event, position)

    async def _live(self, delta: TurnEvent, position: int | None) -> list[TurnEvent]:
        if position is None or position == self.cursor:
            return [delta]
        if position < self.cursor:
            return []  # its step committed, and the reader was sent that already
        caught = await self.catch_up()
        return [*caught, delta] if self.cursor == position else caught
