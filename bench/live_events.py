"""Latency of a live `message.delta` from the process running a turn to an observer in another
process, through `RedisEventRelay`, next to the floor: a bare Redis PUBLISH -> subscriber between
the same two processes, measured in the same run.

    python -m bench.live_events [--deltas 400] [--delay 0.005] [--redis-url URL]

This process is the observer (a runtime that runs no turns, `session.observe` with the relay
attached, and a plain subscriber for the floor); a child process publishes the floor's messages,
then runs one turn whose scripted model streams `--deltas` deltas `--delay` seconds apart.
Latency is wall clock on one machine: the child stamps each delta as its turn emits it (each
floor message as it publishes it), this process as its observer gets it. Redis comes from
`--redis-url` / `BOT_BENCH_REDIS_URL` (default `redis://127.0.0.1:6379/0`); every channel is
under a fresh `bot-bench:<random>` prefix, and nothing is stored. The exit status is 0 whatever
the figures: this is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from typing import Any

from redis.asyncio import Redis

from agent import Agent, Runtime, ScriptedModel, ScriptedReply, TurnEvent
from storage import MemoryStore
from storage.redis.events import RedisEventRelay

SESSION = "bench:live"
AGENT = Agent(name="bench", instructions="x")


def _words(count: int) -> list[str]:
    return [f"w{i:05d} " for i in range(count)]


# -- the child: publishes the floor's messages, then runs the turn ------------------------------


class _Stamps:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, float]] = []
        self.done = asyncio.Event()

    async def emit(self, event: TurnEvent) -> None:
        if event.type == "message.delta":
            self.emitted.append((event.text, time.time()))
        elif event.type == "turn.completed":
            self.done.set()


async def child(url: str, prefix: str, count: int, delay: float) -> None:
    raw = Redis.from_url(url)
    stamps = _Stamps()
    model = ScriptedModel([ScriptedReply(text=_words(count))], delta_delay=delay)
    runtime = Runtime(MemoryStore(), model, agent=AGENT, sink=stamps)
    relay = RedisEventRelay(url, prefix=f"{prefix}:events:")
    relay.attach(runtime)
    try:
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for i in range(count):
            await asyncio.sleep(delay)
            await raw.publish(f"{prefix}:floor", json.dumps([i, time.time()]))
        async with runtime:
            await runtime.session(AGENT, SESSION).start("go")
            await asyncio.wait_for(stamps.done.wait(), 120)
        print("EMITTED " + json.dumps(stamps.emitted), flush=True)
    finally:
        await relay.close()
        await raw.aclose()


# -- this process: the observer -------------------------------------------------------------


def _spread(lags: list[float]) -> str:
    ordered = sorted(lags)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000

    return (
        f"{len(ordered):>5} | {statistics.median(ordered) * 1000:8.2f} | {at(0.9):8.2f} | "
        f"{at(0.99):8.2f} | {ordered[-1] * 1000:8.2f}"
    )


async def observe(url: str, count: int, delay: float) -> None:
    prefix = f"bot-bench:{secrets.token_hex(6)}"
    runtime = Runtime(MemoryStore(), ScriptedModel([]), agent=AGENT, run_turns=False)
    relay = RedisEventRelay(url, prefix=f"{prefix}:events:")
    relay.attach(runtime)
    received: dict[str, float] = {}
    floor: list[float] = []

    def on_delta(event: TurnEvent) -> None:
        if event.type == "message.delta":
            received[event.text] = time.time()

    await runtime.session(AGENT, SESSION).observe(on_delta)
    raw = Redis.from_url(url)
    pubsub = raw.pubsub()
    await pubsub.subscribe(f"{prefix}:floor")
    await asyncio.wait_for(relay.wait_watching(SESSION), 10)

    async def read_floor() -> None:
        while len(floor) < count:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
            if message is not None:
                floor.append(time.time() - json.loads(message["data"])[1])

    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "bench.live_events", "--child", "--redis-url", url),
        *("--prefix", prefix, "--deltas", str(count), "--delay", str(delay)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    try:
        reading = asyncio.create_task(read_floor())
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        emitted: list[Any] = []
        while line := (await proc.stdout.readline()).decode():
            if line.startswith("EMITTED "):
                emitted = json.loads(line[len("EMITTED ") :])
        await proc.wait()
        await asyncio.wait_for(reading, 10)
    finally:
        await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
        await raw.aclose()
        await relay.close()
        await runtime.close()
    relayed = [received[text] - sent for text, sent in emitted if text in received]
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"live deltas across two processes via Redis ({count} each, {delay * 1000:g} ms apart)")
    print(f"load average {load}; all figures in ms (wall clock, one machine)")
    print()
    print(f"{'path':<40} |     n |      p50 |      p90 |      p99 |      max")
    print(f"{'Redis PUBLISH -> subscriber (floor)':<40} | {_spread(floor)}")
    print(f"{'turn emits -> observer in other process':<40} | {_spread(relayed)}")
    if len(relayed) < len(emitted):
        print(f"({len(emitted) - len(relayed)} of {len(emitted)} deltas not received)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live_events")
    parser.add_argument("--redis-url", default=os.environ.get("BOT_BENCH_REDIS_URL"))
    parser.add_argument("--deltas", type=int, default=400)
    parser.add_argument("--delay", type=float, default=0.005)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    url = args.redis_url or "redis://127.0.0.1:6379/0"
    if args.child:
        asyncio.run(child(url, args.prefix, args.deltas, args.delay))
    else:
        asyncio.run(observe(url, args.deltas, args.delay))
    return 0


if __name__ == "__main__":
    sys.exit(main())
