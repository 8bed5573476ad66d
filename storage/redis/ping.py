"""`RedisPing`: whether Redis answers, for a readiness probe.

One client per probe owner, kept open between probes (a probe every few seconds must not open a
connection each time), with short timeouts so a Redis that hangs makes the probe fail fast
instead of hanging it. Failures are answered, never raised, and never carry the URL (it may
hold a password).
"""

from __future__ import annotations

import asyncio

from redis.asyncio import Redis

from storage.redis.closing import close_client
from storage.redis.health import UNREACHABLE


class RedisPing:
    def __init__(self, url: str, *, timeout: float = 2.0) -> None:
        self.timeout = timeout
        self._client: Redis = Redis.from_url(
            url, socket_connect_timeout=timeout, socket_timeout=timeout
        )

    async def ping(self) -> bool:
        """True when Redis answered PING within the timeout."""
        try:
            async with asyncio.timeout(self.timeout + 0.5):
                return bool(await self._client.ping())
        except TimeoutError:
            return False
        except UNREACHABLE:
            return False

    async def close(self) -> None:
        await close_client(self._client)
