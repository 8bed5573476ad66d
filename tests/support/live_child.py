"""Process A of the live-event tests: runs the turns other processes queue, with a Redis event
relay attached, and reports what it emitted and what its own observer saw.

    python -m tests.support.live_child DATABASE_URL REDIS_URL PREFIX SESSION OTHER_SESSION N DELAY

It streams `N` deltas (`w000 `, `w001 `, ...) `DELAY` seconds apart on `SESSION`, and a few on
`OTHER_SESSION` (which the test process does not watch). It observes `SESSION` itself, so its
relay is subscribed to its own channel and hears its own publications back: those must not reach
its hub a second time. Protocol on stdout: `READY` once that subscription is confirmed; then,
after both turns completed, `EMITTED <json: [[text, wall time], ...]>` (every delta of
`SESSION` as it was emitted here) and `OBSERVED <json: [text, ...]>` (what its own observer
got). It exits on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time

from agent import Agent, Runtime, ScriptedModel, ScriptedReply, TurnEvent
from storage import SqlStore
from storage.redis.events import RedisEventRelay


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def words(count: int, tag: str = "w") -> list[str]:
    return [f"{tag}{i:03d} " for i in range(count)]


class Stamps:
    """The host's sink: the wall time each delta of the watched session left the turn."""

    def __init__(self, session: str, sessions: set[str]) -> None:
        self.session = session
        self.emitted: list[tuple[str, float]] = []
        self.waiting = set(sessions)
        self.done = asyncio.Event()

    async def emit(self, event: TurnEvent) -> None:
        if event.type == "message.delta" and event.session == self.session:
            self.emitted.append((event.text, time.time()))
        elif event.type == "turn.completed":
            self.waiting.discard(event.session)
            if not self.waiting:
                self.done.set()


async def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("db_url", "redis_url", "prefix", "session", "other"):
        parser.add_argument(name)
    parser.add_argument("count", type=int)
    parser.add_argument("delay", type=float)
    args = parser.parse_args()

    agent = Agent(name="live", instructions="x")
    model = ScriptedModel(
        by_opening={
            "main": [ScriptedReply(text=words(args.count))],
            "other": [ScriptedReply(text=words(5, "x"))],
        },
        delta_delay=args.delay,
    )
    stamps = Stamps(args.session, {args.session, args.other})
    store = await SqlStore.open(args.db_url)
    runtime = Runtime(
        store, model, agent=agent, sink=stamps, recovery_interval=0.05, poll_interval=0.05
    )
    relay = RedisEventRelay(args.redis_url, prefix=args.prefix)
    observed: list[str] = []

    def mine(event: TurnEvent) -> None:
        if event.type == "message.delta":
            observed.append(event.text)

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        relay.attach(runtime)
        await runtime.session(agent, args.session).observe(mine)
        async with asyncio.timeout(10):
            await relay.wait_watching(args.session)
        runtime.start_recovery()
        _say("READY")
        async with asyncio.timeout(60):
            await stamps.done.wait()
        await asyncio.sleep(0.3)  # its own publications come back by now, if they ever do
        _say(f"EMITTED {json.dumps(stamps.emitted)}")
        _say(f"OBSERVED {json.dumps(observed)}")
        await stop.wait()
    finally:
        await relay.close()
        await runtime.close()
        await store.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
