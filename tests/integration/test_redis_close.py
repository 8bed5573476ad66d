"""Closing the Redis components ends, whatever redis-py's own close does: its `PubSub.aclose`
can wait for ever on a socket whose server died or restarted (redis/redis-py#3941), which once
hung a worker's shutdown for the test's whole 120 s. Here that close is made to hang for good,
against the real Redis: the dispatcher's `close()` still returns and its `serve()` ends."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio.client import PubSub

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
        async with asyncio.timeout(60):  # far past its bound (2 s), far short of for ever
            await dispatcher.close()
            await serving
        assert hung, "the subscription's close was reached"
    finally:
        serving.cancel()
        await runtime.close()
