"""Live events across processes: a turn runs in a child process (A, `tests.support.live_child`)
and this process (B: a runtime that runs no turns, on the same PostgreSQL database and Redis)
observes its session through `RedisEventRelay`.

Latency is measured by wall clock on one machine: A stamps each delta as its turn emits it, B as
its observer receives it. The machine is shared and busy, so the test asserts on the 90th
percentile, not on every sample.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from agent import Agent, Runtime, ScriptedModel, TurnEvent, TurnStatus
from storage import SqlStore
from storage.redis.events import RedisEventRelay
from tests.support import children
from tests.support.children import Process, stop, wait_line
from tests.support.live_child import words

pytestmark = [pytest.mark.redis, pytest.mark.postgres]

MAIN, OTHER = "live:main", "live:other"
DELTAS, DELAY = 40, 0.03


@contextlib.asynccontextmanager
async def process_a(db_url: str, redis_url: str, prefix: str) -> AsyncIterator[Process]:
    args = (db_url, redis_url, prefix, MAIN, OTHER, str(DELTAS), str(DELAY))
    proc = await children.start("tests.support.live_child", *args, stderr=None)
    try:
        yield proc
    finally:
        await stop(proc)


async def line(proc: Process, prefix: str, within: float = 60) -> str:
    """What process A printed after `prefix`."""
    return (await wait_line(proc, prefix, within))[len(prefix) :].strip()


async def eventually(check: Callable[[], bool], within: float = 10) -> None:
    async with asyncio.timeout(within):
        while True:
            if check():
                return
            await asyncio.sleep(0.02)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def test_an_observer_in_another_process_gets_every_delta_within_100_ms(
    postgres_url: str, redis_url: str, redis_prefix: str
) -> None:
    prefix = f"{redis_prefix}:events:"
    agent = Agent(name="live", instructions="x")
    store = await SqlStore.open(postgres_url)
    runtime = Runtime(store, ScriptedModel([]), agent=agent, run_turns=False, poll_interval=0.05)
    relay = RedisEventRelay(redis_url, prefix=prefix)
    received: list[tuple[str, float]] = []
    everything: list[TurnEvent] = []

    def on_delta(event: TurnEvent) -> None:
        if event.type == "message.delta":
            received.append((event.text, time.time()))

    def on_any(event: TurnEvent) -> None:
        everything.append(event)

    try:
        relay.attach(runtime)
        runtime.hub.subscribe(on_any)  # every session: shows what reached this hub at all
        session = runtime.session(agent, MAIN)
        await session.observe(on_delta)
        async with asyncio.timeout(10):
            await relay.wait_watching(MAIN)
        raw = Redis.from_url(redis_url)
        try:  # a stray publisher must not break the listener
            await raw.publish(relay.channel(MAIN), b"not a live event")
            await raw.publish(relay.channel(MAIN), b'{"v": 1, "o": "x", "t": 1, "e": {}}')
        finally:
            await raw.aclose()
        async with process_a(postgres_url, redis_url, prefix) as proc:
            await line(proc, "READY")
            await session.start("main", turn_id="T1")
            await runtime.session(agent, OTHER).start("other", turn_id="T2")
            emitted: list[list[Any]] = json.loads(await line(proc, "EMITTED "))
            observed_in_a: list[str] = json.loads(await line(proc, "OBSERVED "))
            async with asyncio.timeout(10):
                result = await session.result("T1")
            await eventually(lambda: any(e.type == "turn.completed" for e in everything))
        log = await store.read_events(MAIN)
    finally:
        await relay.close()
        await runtime.close()
        await store.close()

    texts = [text for text, _ in emitted]
    assert texts == words(DELTAS)
    assert (result.status, result.text) == (TurnStatus.COMPLETED, "".join(texts))
    assert [text for text, _ in received] == texts, "every delta, in order, once"
    lags = [got - sent for (_, sent), (_, got) in zip(emitted, received, strict=True)]
    p50, p90 = percentile(lags, 0.5), percentile(lags, 0.9)
    print(f"delta latency A -> B: p50 {p50 * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms")
    assert p90 < 0.1, f"p50 {p50 * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms: {sorted(lags)}"
    assert observed_in_a == texts, "A's own hub got its events once (not again from Redis)"
    assert {e.session for e in everything} == {MAIN}, "nothing of a session B did not watch"
    durable = [(e.seq, e.type) for e in everything if e.seq > 0]
    assert durable == [(e.seq, e.type) for e in log], "the durable events too, with their seqs"
