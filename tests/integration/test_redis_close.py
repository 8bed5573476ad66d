"""Closing the Redis components ends, whatever redis-py does: its `PubSub.aclose` can wait for
ever on a socket whose server died or restarted (redis/redis-py#3941), and a cancel that lands
inside a command can come out as a `ConnectionError` (redis/redis-py#2717), which a loop that
restarts after connection errors took for an outage; either once hung a worker's shutdown for a
test's whole 120 s. Here each is made to happen for sure, against the real Redis: the
dispatcher's `close()` still returns and its `serve()` ends."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import ConnectionError as RedisConnectionError

from agent import Agent, Runtime, ScriptedModel
from storage import MemoryStore
from storage.redis.dispatch import RedisDispatcher

pytestmark = pytest.mark.redis


async def test_a_close_that_redis_py_never_finishes_still_ends_serve(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hung: list[PubSub] = []

    async def never_closes(self: PubSub) -> None:
        hung.append(self)
        await asyncio.Event().wait()  # what a `wait_closed()` that never returns looks like

    monkeypatch.setattr(PubSub, "aclose", never_closes)
    await _serve_then_close(redis_url, redis_prefix)
    assert hung, "the subscription's close was reached"


async def test_a_cancel_that_redis_py_turns_into_a_connection_error_still_ends_serve(
    redis_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    swallowed: list[str] = []
    blocking = asyncio.Event()
    read = Redis.xreadgroup

    async def cancel_becomes_error(self: Redis, *args: object, **kwargs: object) -> object:
        if kwargs.get("block") is None:  # the first read, of entries left from before
            return await read(self, *args, **kwargs)  # type: ignore[arg-type]
        blocking.set()
        try:
            await asyncio.Event().wait()  # a blocking read that only a cancel ends
        except asyncio.CancelledError:
            swallowed.append("xreadgroup")
            raise RedisConnectionError("Connection closed by server.") from None
        raise AssertionError("unreachable")

    monkeypatch.setattr(Redis, "xreadgroup", cancel_becomes_error)
    # Ready comes before the first blocking read: close only once one is under way, or on a busy
    # machine the close can land before it and prove nothing.
    await _serve_then_close(redis_url, redis_prefix, before_close=blocking)
    assert swallowed, "the cancel landed inside a read"


async def _serve_then_close(
    redis_url: str, redis_prefix: str, *, before_close: asyncio.Event | None = None
) -> None:
    dispatcher = RedisDispatcher(
        redis_url,
        stream=f"{redis_prefix}:turns",
        group=f"{redis_prefix}:workers",
        channel=f"{redis_prefix}:cancel",
    )
    runtime = Runtime(MemoryStore(), ScriptedModel([]), agent=Agent(name="a", instructions="x"))
    serving = asyncio.create_task(dispatcher.serve(runtime))
    try:
        async with asyncio.timeout(60):
            await dispatcher.wait_ready()
            if before_close is not None:
                await before_close.wait()
        async with asyncio.timeout(60):  # far past the bounds (seconds), short of for ever
            await dispatcher.close()
            await serving
    finally:
        serving.cancel()
        await runtime.close()
