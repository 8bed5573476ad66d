"""Closing Redis connections without waiting for ever.

redis-py's `aclose` ends by awaiting the socket's `wait_closed()`, which can hang when the server
died or restarted under the connection (redis/redis-py#3941): a worker's shutdown, or its Redis
loop's restart, then never ends. So every close here is bounded; past the bound the connection
is dropped without waiting (`disconnect(nowait=True)`; a client's pool is left to be closed with
the objects), which is all a closing process needs.
"""

from __future__ import annotations

import asyncio
import contextlib

from redis.asyncio import Redis
from redis.asyncio.client import PubSub

from storage.redis.health import UNREACHABLE

CLOSE_WITHIN = 2.0
"""Seconds a close may take before its connections are dropped without waiting."""


async def close_pubsub(pubsub: PubSub) -> None:
    """Unsubscribe and release `pubsub`'s connection, or drop it past `CLOSE_WITHIN`."""
    try:
        async with asyncio.timeout(CLOSE_WITHIN):
            await pubsub.aclose()
    except TimeoutError:
        connection = pubsub.connection
        if connection is not None:
            with contextlib.suppress(*UNREACHABLE):
                await connection.disconnect(nowait=True)
    except UNREACHABLE:
        pass  # closing towards a dead server


async def close_client(client: Redis) -> None:
    """Release the client's pool; past `CLOSE_WITHIN`, leave its sockets to be closed with the
    objects (a pool close waits on each, and the one that hangs is what we would wait for)."""
    with contextlib.suppress(TimeoutError, *UNREACHABLE):
        async with asyncio.timeout(CLOSE_WITHIN):
            await client.aclose()
