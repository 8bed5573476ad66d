"""`RedisDispatcher`: the engine's `Dispatcher` seam on Redis, so a worker hears of new work and
cancellations in milliseconds instead of at its next database sweep or lease heartbeat.

- Turn news is a stream read by one consumer group: each entry goes to one worker, and an entry
  a worker read but never acknowledged (it died in between) is claimed by another after
  `claim_idle` seconds. An entry only names a session: the turns themselves are in the database,
  so a kick is a hint to look, and a duplicate or stale one costs a query and nothing else.
- Cancellations are pub/sub: every worker must hear them (only the one running the turn acts),
  and one missed while disconnected is caught by the lease heartbeat, which reads the durable
  cancel request.

Redis is never the record. Every Redis failure is logged (once per outage, without the password)
and swallowed: a web process still queues durably, workers back off and reconnect, and meanwhile
the runtime's recovery sweep finds the work. Nothing here raises into the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ResponseError

from agent.seams import DispatchTarget
from storage.redis.closing import close_client, close_pubsub
from storage.redis.health import REWARN, UNREACHABLE, RedisHealth, redact

__all__ = ["REWARN", "UNREACHABLE", "RedisDispatcher", "redact"]

log = logging.getLogger(__name__)

Entry = tuple[str, dict[str, str] | None]


class RedisDispatcher:
    def __init__(
        self,
        url: str = "redis://127.0.0.1:6379/0",
        *,
        stream: str = "bot:turns",
        group: str = "bot:workers",
        channel: str = "bot:cancel",
        maxlen: int = 10_000,
        block: float = 1.0,
        batch: int = 100,
        claim_idle: float = 30.0,
        claim_interval: float = 10.0,
        retry_min: float = 0.2,
        retry_max: float = 10.0,
        connect_timeout: float = 2.0,
    ) -> None:
        """`maxlen` bounds the stream (approximately: trimming whole nodes is cheap); entries
        are acknowledged at once, so only a backlog nobody reads is ever trimmed, and the sweep
        finds that work anyway. `claim_idle` is how long an unacknowledged entry waits before
        another worker takes it; `retry_min`/`retry_max` bound the reconnect back-off."""
        self.health = RedisHealth(url, log, "workers fall back to the database sweep")
        self.where = self.health.where
        self.stream, self.group, self.channel = stream, group, channel
        self.maxlen, self.batch = maxlen, batch
        self.block_ms = max(1, int(block * 1000))
        self.claim_idle_ms = max(0, int(claim_idle * 1000))
        self.claim_interval = claim_interval
        self.retry_min, self.retry_max = retry_min, retry_max
        # One quick retry covers a pooled connection that died with a Redis restart; longer
        # outages are the back-off loop's business, not the client's.
        self._client: Redis = Redis.from_url(
            url,
            decode_responses=True,
            socket_connect_timeout=connect_timeout,
            socket_timeout=block + 5.0,
            health_check_interval=30,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 1),
        )
        self._ready = {"dispatch": asyncio.Event(), "cancel": asyncio.Event()}
        self._stop = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    async def __aenter__(self) -> RedisDispatcher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self, grace: float = 5.0) -> None:
        """Stop `serve` (it returns), then release the connections; idempotent. Close the
        runtime after this, so no kick arrives at a runtime that stopped taking work."""
        self._stop.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):  # wait_for may swallow a cancel on 3.11
                await self._idle.wait()
        await close_client(self._client)

    # the web side: Dispatcher -------------------------------------------------------------

    async def queued(self, session: str) -> None:
        """Append a hint for one worker; on failure the session waits for a sweep instead."""
        await self._quietly(
            "queue news",
            lambda: self._client.xadd(
                self.stream, {"session": session}, maxlen=self.maxlen, approximate=True
            ),
        )

    async def cancel(
        self, session: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """Broadcast: the worker holding the session acts, the others ignore it."""
        payload = json.dumps({"session": session, "reason": reason, "keep": keep, "only": only})
        await self._quietly("cancel signal", lambda: self._client.publish(self.channel, payload))

    async def _quietly(self, what: str, command: Callable[[], Awaitable[Any]]) -> None:
        if self._stop.is_set():  # closed: the database sweep has it
            return
        try:
            await command()
        except UNREACHABLE as err:
            self._lost(what, err)
        else:
            self._back()

    # the worker side ----------------------------------------------------------------------

    async def serve(self, runtime: DispatchTarget) -> None:
        """Feed `runtime` until `close()`: kick sessions read off the stream (the runtime's
        `owner` is the consumer name) and pass cancellations to `signal_cancel_here`. Returns
        on `close()`; survives Redis outages by reconnecting with back-off."""
        if self._stop.is_set():
            return
        if not self._idle.is_set():
            raise RuntimeError("this RedisDispatcher is already serving a runtime")
        self._idle.clear()
        loops = [
            asyncio.create_task(self._supervise("dispatch", self._read, runtime)),
            asyncio.create_task(self._supervise("cancel", self._listen, runtime)),
        ]
        stopped = asyncio.create_task(self._stop.wait())
        try:
            await asyncio.wait([*loops, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*loops, stopped):
                task.cancel()
            await asyncio.gather(*loops, stopped, return_exceptions=True)
            for ready in self._ready.values():
                ready.clear()
            self._idle.set()

    async def wait_ready(self) -> None:
        """Until `serve` has its consumer group and its cancel subscription (a broadcast sent
        earlier would miss this worker). Waits out an outage: bound it with `asyncio.timeout`."""
        await asyncio.gather(*(ready.wait() for ready in self._ready.values()))

    async def _supervise(
        self,
        name: str,
        run: Callable[[DispatchTarget, asyncio.Event], Awaitable[None]],
        runtime: DispatchTarget,
    ) -> None:
        """Run one loop forever: after a failure wait (doubling up to `retry_max`, jittered so a
        fleet does not reconnect in step) and start it again."""
        ready = self._ready[name]
        delay = self.retry_min
        # Until `close()`: redis-py can turn the cancel `serve` sends into a ConnectionError when
        # it lands inside a command (redis/redis-py#2717), which alone would restart the loop.
        while not self._stop.is_set():
            try:
                await run(runtime, ready)
            except UNREACHABLE as err:
                if self._stop.is_set():
                    return
                self._lost(f"{name} loop", err)
            except Exception:
                log.exception("Redis %s loop failed unexpectedly; restarting it", name)
            if self._stop.is_set():
                return
            if ready.is_set():
                delay = self.retry_min
            ready.clear()
            await asyncio.sleep(delay * random.uniform(0.5, 1.0))
            delay = min(delay * 2, self.retry_max)

    async def _read(self, runtime: DispatchTarget, ready: asyncio.Event) -> None:
        consumer = runtime.owner
        await self._ensure_group()
        ready.set()
        self._back()
        # Entries this consumer name read earlier but never acknowledged come first ("0").
        while entries := await self._read_group(consumer, "0", None):
            await self._deliver(runtime, entries)
        loop = asyncio.get_running_loop()
        next_claim = loop.time()
        cursor = "0-0"
        while not self._stop.is_set():
            await self._deliver(runtime, await self._read_group(consumer, ">", self.block_ms))
            if loop.time() >= next_claim:
                cursor = await self._claim(runtime, consumer, cursor)
                next_claim = loop.time() + self.claim_interval

    async def _ensure_group(self) -> None:
        """Create the group from the stream's start, so entries queued while no worker had
        created it yet (first deploy, or a Redis that restarted empty) are still delivered."""
        try:
            await self._client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except ResponseError as err:
            if "BUSYGROUP" not in str(err):
                raise

    async def _read_group(self, consumer: str, start: str, block: int | None) -> list[Entry]:
        reply: Any = await self._client.xreadgroup(
            self.group, consumer, {self.stream: start}, count=self.batch, block=block
        )
        # RESP2 gives [[stream, entries]], RESP3 {stream: [entries]}.
        streams = reply.values() if isinstance(reply, dict) else [e for _, e in reply or []]
        return [(entry_id, fields) for found in streams for entry_id, fields in found]

    async def _claim(self, runtime: DispatchTarget, consumer: str, cursor: str) -> str:
        """Take over entries some consumer read and never acknowledged (it died)."""
        reply: Any = await self._client.xautoclaim(
            self.stream, self.group, consumer, self.claim_idle_ms, cursor, count=self.batch
        )
        entries: list[Entry] = [(i, f) for i, f in reply[1] if i is not None]
        if entries:
            log.info("reclaimed %d unacknowledged turn notice(s)", len(entries))
            await self._deliver(runtime, entries)
        return str(reply[0])

    async def _deliver(self, runtime: DispatchTarget, entries: list[Entry]) -> None:
        """Kick, then acknowledge: a consumer dying in between leaves the entry to be claimed.
        After the kick the database owns the turn, so acknowledging before it runs loses
        nothing."""
        if not entries:
            return
        for entry_id, fields in entries:
            session = (fields or {}).get("session")
            if session:
                runtime.kick(session)
            else:
                log.warning("dropping turn notice %s: no session (trimmed or malformed)", entry_id)
        await self._client.xack(self.stream, self.group, *(entry_id for entry_id, _ in entries))

    async def _listen(self, runtime: DispatchTarget, ready: asyncio.Event) -> None:
        """Ready only once the server confirmed the subscription: SUBSCRIBE is not awaited, and
        a broadcast sent before the server has it is lost to this worker."""
        pubsub: PubSub = self._client.pubsub()
        try:
            await pubsub.subscribe(self.channel)
            while not self._stop.is_set():
                message = await pubsub.get_message(timeout=1.0)
                kind = message and message.get("type")
                if kind == "subscribe":
                    ready.set()
                    self._back()
                elif kind == "message":
                    self._signal(runtime, message.get("data"))
        finally:
            await close_pubsub(pubsub)

    def _signal(self, runtime: DispatchTarget, data: Any) -> None:
        try:
            news = json.loads(data)
            session, reason = news["session"], news["reason"]
            keep, only = news.get("keep"), news.get("only")
            if not all(isinstance(v, str) for v in (session, reason)) or not all(
                v is None or isinstance(v, str) for v in (keep, only)
            ):
                raise TypeError("wrong field types")
        except (ValueError, TypeError, KeyError) as err:
            log.warning("ignoring malformed cancel signal (%s)", type(err).__name__)
            return
        runtime.signal_cancel_here(session, reason, keep=keep, only=only)

    # health -------------------------------------------------------------------------------

    def _lost(self, what: str, err: Exception) -> None:
        self.health.lost(what, err)

    def _back(self) -> None:
        self.health.back()
