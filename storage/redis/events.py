"""`RedisEventRelay`: the live events of a turn, in every process that observes its session.

A turn's events reach the `EventHub` of the process running it; a renderer or an observer in
another process (a web process, the worker holding the thread's delivery lease) would otherwise
see the reply only as each step commits. Connected to a runtime's hub, the relay:

- publishes every event the hub emits, deltas and durable events alike, on the session's
  channel (`<prefix><session key>`, Redis pub/sub; see `storage.redis.live_wire` for the message),
  from a bounded queue drained by one task, so a turn never waits on Redis and the order is kept;
- subscribes to the channels of the sessions observed in this process (the hub tells it), and
  delivers what other processes published there to the hub's observers. Its own messages
  come back too; they are dropped by origin. Nothing received is published again.

Redis is never the record. Pub/sub is at-most-once, so a process that was not subscribed (or
Redis was down) misses events; the durable ones are in the session's log, which renderers read
anyway (the relayed ones only wake them sooner), and a step whose deltas were partly lost shows
when it commits. Every Redis failure is logged once per outage, without the password, and
swallowed: publishing drops what it cannot send, listening reconnects with back-off and
subscribes again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from agent.seams import (
    MessageDelta,
    ProgressUpdated,
    RelayHost,
    RelayHub,
    SessionStore,
    TurnEvent,
)
from storage.redis.closing import close_client, close_pubsub
from storage.redis.health import UNREACHABLE, RedisHealth
from storage.redis.live_wire import (
    MAX_BYTES,
    Continuity,
    MalformedMessage,
    Reference,
    Sequencer,
    decode,
    encode,
)

log = logging.getLogger(__name__)

BATCH = 256
"""Messages sent in one pipeline (one round trip)."""


class RedisEventRelay:
    """`relay.attach(runtime)` from the event loop; `await relay.close()` before the runtime's
    close. Implements the engine's `EventRelay` seam."""

    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        prefix: str = "bot:events:",
        max_bytes: int = MAX_BYTES,
        backlog: int = 10_000,
        retry_min: float = 0.2,
        retry_max: float = 10.0,
        connect_timeout: float = 2.0,
        on_lag: Callable[[float], None] | None = None,
    ) -> None:
        """`max_bytes` bounds one message; `backlog` the events waiting to be published (more
        are dropped while Redis is slow or down); `retry_min`/`retry_max` bound the listener's
        reconnect back-off. `on_lag` is told, for each message another process published, the
        seconds from its publish (the sender's clock, in the message) to its receipt here
        (this host's clock: hosts' clock skew shows in it); it must not raise or block."""
        self._on_lag = on_lag
        self.prefix = prefix
        self.origin = uuid.uuid4().hex[:16]
        self.max_bytes, self.retry_min, self.retry_max = max_bytes, retry_min, retry_max
        self.health = RedisHealth(
            url, log, "other processes show this one's replies as their steps commit"
        )
        self._client: Redis = Redis.from_url(
            url,
            socket_connect_timeout=connect_timeout,
            socket_timeout=connect_timeout + 3.0,
            health_check_interval=30,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
        )
        self._outbox: deque[tuple[bytes, bytes]] = deque()
        self._backlog = backlog
        self._dropped = 0
        self._sequencer = Sequencer()
        self._continuity = Continuity()
        self._watched: dict[bytes, str] = {}
        """Channels of the sessions observed here -> their session keys."""
        self._confirmed: set[bytes] = set()
        self._confirmation = asyncio.Event()
        """Set, and replaced, whenever the server confirms a subscription."""
        self._changed = asyncio.Event()
        self._has_mail = asyncio.Event()
        self._hub: RelayHub | None = None
        self._store: SessionStore | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    def channel(self, session: str) -> bytes:
        return (self.prefix + session).encode("utf-8", "surrogatepass")

    # lifecycle ----------------------------------------------------------------------------

    def attach(self, runtime: RelayHost) -> None:
        """Connect to `runtime`'s hub: its events go out, other processes' come in for the
        sessions it observes; oversized durable events are read from its store."""
        if self._hub is not None:
            raise RuntimeError("this RedisEventRelay is already attached to a runtime")
        self._hub, self._store = runtime.hub, runtime.store
        self._tasks = [
            asyncio.create_task(self._send_loop(), name="live-events:send"),
            asyncio.create_task(self._listen_loop(), name="live-events:listen"),
        ]
        runtime.hub.connect(self)

    async def close(self) -> None:
        """Disconnect from the hub, stop both tasks and release the connections; idempotent.
        Events still queued are dropped (they are live; the durable ones are in the log)."""
        self._closed = True
        if self._hub is not None:
            self._hub.connect(None)
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=2.0)
        self._tasks = []
        await close_client(self._client)

    async def wait_watching(self, session: str) -> None:
        """Until Redis confirmed this process's subscription to `session` (a message published
        earlier is not delivered here). Waits out an outage: bound it with `asyncio.timeout`."""
        channel = self.channel(session)
        while channel not in self._confirmed:
            await self._confirmation.wait()

    # the hub's side: EventRelay -----------------------------------------------------------

    def publish(self, event: TurnEvent) -> None:
        """Queue the event for the sending task; never blocks, never raises into the turn."""
        if self._closed:
            return
        stamped, offset = self._sequencer.stamp(event)
        channel = self.channel(event.session)
        messages = encode(
            stamped,
            origin=self.origin,
            sent_at=time.time(),
            offset=offset,
            max_bytes=self.max_bytes,
        )
        for data in messages:
            if len(self._outbox) >= self._backlog:
                self._dropped += 1
                continue
            self._outbox.append((channel, data))
        if not messages:
            log.debug("a %s event of %s is too large to relay", event.type, event.session)
        self._has_mail.set()

    def watch(self, session: str) -> None:
        if self._closed:
            return
        self._watched[self.channel(session)] = session
        self._changed.set()

    def unwatch(self, session: str) -> None:
        if self._closed:
            return
        channel = self.channel(session)
        self._watched.pop(channel, None)
        self._confirmed.discard(channel)
        self._continuity.forget(session)
        self._changed.set()

    # publishing ---------------------------------------------------------------------------

    async def _send_loop(self) -> None:
        """Publish the queue in order, a pipeline at a time. While Redis is unreachable, what
        could not be sent is dropped (live events are worth nothing late) and the loop backs
        off; the queue stays bounded by `backlog` meanwhile."""
        delay = self.retry_min
        while not self._closed:  # closed: a cancel redis-py turned into an error ends it too
            await self._has_mail.wait()
            self._has_mail.clear()
            while self._outbox:
                batch = [self._outbox.popleft() for _ in range(min(BATCH, len(self._outbox)))]
                try:
                    await self._send(batch)
                except UNREACHABLE as err:
                    self.health.lost("publishing live events", err)
                    self._dropped += len(batch) + len(self._outbox)
                    self._outbox.clear()  # stale by the time Redis is back
                    await asyncio.sleep(delay * random.uniform(0.5, 1.0))
                    delay = min(delay * 2, self.retry_max)
                    continue
                except Exception:
                    log.exception("publishing live events failed unexpectedly; dropped a batch")
                    continue
                delay = self.retry_min
                self.health.back()
                if self._dropped:
                    log.info("dropped %d live event(s) Redis could not take", self._dropped)
                    self._dropped = 0

    async def _send(self, batch: list[tuple[bytes, bytes]]) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            for channel, data in batch:
                pipe.publish(channel, data)
            await pipe.execute()

    # listening ----------------------------------------------------------------------------

    async def _listen_loop(self) -> None:
        """Connect once a session is observed here; after a failure wait (doubling up to
        `retry_max`, jittered so a fleet does not reconnect in step) and connect again."""
        delay = self.retry_min
        while not self._closed:
            while not self._watched:
                await self._changed.wait()
                self._changed.clear()
            try:
                await self._listen()
            except UNREACHABLE as err:
                if self._closed:
                    return  # a cancel redis-py turned into a ConnectionError (redis-py#2717)
                self.health.lost("listening for live events", err)
            except Exception:
                log.exception("the live-event listener failed unexpectedly; restarting it")
            self._confirmed.clear()
            if self._closed:
                return
            if self.health.healthy:
                delay = self.retry_min
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.retry_max)

    async def _listen(self) -> None:
        """One connection's life: a task keeps its subscriptions equal to the watched sessions
        (writes only), this one reads; either failing ends both."""
        pubsub: PubSub = self._client.pubsub()
        subscribing: asyncio.Task[None] | None = None
        try:
            connect: Callable[[], Awaitable[None]] = pubsub.connect
            await connect()
            self._changed.set()  # subscribe to everything watched, on this new connection
            subscribing = asyncio.create_task(self._subscribe(pubsub))
            while not self._closed:
                if subscribing.done():
                    await subscribing  # raises what stopped it
                message = await pubsub.get_message(timeout=1.0)
                if message is not None:
                    await self._on_message(message)
        finally:
            if subscribing is not None:
                # Bounded: redis-py may swallow a cancel that lands inside a command.
                subscribing.cancel()
                await asyncio.wait([subscribing], timeout=1.0)
            await close_pubsub(pubsub)

    async def _subscribe(self, pubsub: PubSub) -> None:
        """Subscribe and unsubscribe as sessions are watched and unwatched here. The server's
        confirmations come to the reader, which marks a channel ready (`wait_watching`)."""
        asked: set[bytes] = set()
        while True:
            await self._changed.wait()
            self._changed.clear()
            wanted = set(self._watched)
            if wanted - asked:
                await pubsub.subscribe(*(wanted - asked))
            if asked - wanted:
                await pubsub.unsubscribe(*(asked - wanted))
            asked = wanted

    async def _on_message(self, message: dict[str, Any]) -> None:
        kind, channel = message.get("type"), message.get("channel")
        if not isinstance(channel, bytes):
            return
        if kind == "subscribe":
            self._confirmed.add(channel)
            self._confirmation.set()
            self._confirmation = asyncio.Event()
            self.health.back()
        elif kind == "unsubscribe":
            self._confirmed.discard(channel)
        elif kind == "message":
            await self._receive(channel, message.get("data"))

    async def _receive(self, channel: bytes, data: Any) -> None:
        session = self._watched.get(channel)
        hub = self._hub
        if session is None or hub is None or not isinstance(data, bytes):
            return
        try:
            received = decode(data)
        except MalformedMessage as err:
            log.debug("ignoring a malformed live event on %r (%s)", session, err)
            return
        event = received.event
        if received.origin == self.origin or event.session != session:
            return  # our own, back from Redis (the hub had it first), or a stray
        if self._on_lag is not None:
            try:
                self._on_lag(time.time() - received.sent_at)
            except Exception:
                log.debug("the relay's lag callback failed", exc_info=True)
        if isinstance(event, Reference):
            fetched = await self._fetch(event)
            if fetched is not None:
                hub.deliver(fetched)
        elif isinstance(event, ProgressUpdated):
            if event.after > 0:  # placed by the durable event before it, as a delta is
                hub.deliver(event)
        elif not isinstance(event, MessageDelta) or self._continuity.admit(
            received.origin, event, received.offset
        ):
            hub.deliver(event)

    async def _fetch(self, ref: Reference) -> TurnEvent | None:
        """A durable event too large to relay, read from the log (awaited here, so the events
        after it stay behind it)."""
        if self._store is None:
            return None
        try:
            events = await self._store.read_events(ref.session, ref.seq - 1, 1)
        except Exception as err:
            log.debug("could not read relayed event %s of %r (%s)", ref.seq, ref.session, err)
            return None
        return next((e for e in events if e.seq == ref.seq), None)
