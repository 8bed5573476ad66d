"""A worker process for crash tests: runs the order turn against a real database and, at the
named commit boundary, announces it on stdout and waits there to be SIGKILLed by the parent.

    python -m tests.support.crash_child URL SESSION TURN [--crash before:model:1] [--recover-only]
        [--batch order|parts|asks] [--tool-concurrency N]

`order` (the default) is a remote and a local call on the serial engine (`--tool-concurrency 1`,
the default here), whose boundaries come in one order; `parts` is three remote calls, run side
by side under `--tool-concurrency` 4; `asks` is two calls that each ask a person beside one
that does not (the turn parks on both: `RESULT suspended`).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from agent import Runtime, ScriptedModel, TurnEvent
from storage import SqlStore
from tests.support.engine_fixtures import (
    ASKS_AGENT,
    ASKS_SCRIPT,
    ORDER_AGENT,
    ORDER_SCRIPT,
    PARTS_AGENT,
    PARTS_SCRIPT,
    HookedStore,
)


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("session")
    parser.add_argument("turn")
    parser.add_argument("--crash", default=None, help="stage:label, e.g. after:tool:1:a")
    parser.add_argument("--recover-only", action="store_true")
    parser.add_argument("--tool-concurrency", type=int, default=1, help="1: the serial engine")
    parser.add_argument("--batch", choices=["order", "parts", "asks"], default="order")
    args = parser.parse_args()

    def hook(stage: str, label: str) -> None:
        if args.crash == f"{stage}:{label}":
            _say(f"AT {stage}:{label}")
            time.sleep(600)  # the parent kills us here with SIGKILL

    agent, script, opening = {
        "order": (ORDER_AGENT, ORDER_SCRIPT, "Order two mugs."),
        "parts": (PARTS_AGENT, PARTS_SCRIPT, "Fetch parts x, y and z."),
        "asks": (ASKS_AGENT, ASKS_SCRIPT, "Ask about 41 and 42."),
    }[args.batch]
    inner = await SqlStore.open(args.url)
    store = HookedStore(inner, hook)
    runtime = Runtime(
        store,
        ScriptedModel(script),
        agent=agent,
        tool_concurrency=args.tool_concurrency,
        lease_ttl=0.6,
        recovery_interval=0.1,
        poll_interval=0.05,
    )

    def show(event: TurnEvent) -> None:
        if event.type == "message.delta":
            _say(f"DELTA {event.text}")

    runtime.hub.subscribe(show)
    try:
        async with runtime:
            session = runtime.session(agent, args.session)
            if not args.recover_only:
                await session.start(opening, turn_id=args.turn)
            async with asyncio.timeout(60):
                result = await session.result(args.turn)
            _say(f"RESULT {result.status.value} {result.text}")
    finally:
        await inner.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
