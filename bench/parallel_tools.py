"""`python -m bench.parallel_tools`: what a batch of slow remote tool calls costs a turn, run one
after another (`tool_concurrency=1`) and side by side (4, the default), in the same run.

Each turn is one model reply asking for `--calls` calls of a tool that waits `--tool-ms` (a
lookup, an HTTP call), then a closing reply; the clock runs from the turn's start to its result.
"Tool time" is that wall time less the same turn's with calls that wait nothing (commits, model
steps, the queue), measured in the same run, so what remains is what the waiting cost. The
target: side by side ≈ one call's wait, not the sum.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    TurnStatus,
    tool,
)
from bench.databases import Site, add_site_arguments, sites_from
from storage import SqlStore


@tool
async def wait_ms(ms: int) -> str:
    """Waits as a remote lookup would."""
    await asyncio.sleep(ms / 1000)
    return "ok"


SIDE_BY_SIDE = 4

AGENT = Agent(name="bench-parallel", instructions="Look things up.", tools=[wait_ms])


def _script(calls: int, ms: int, turns: int) -> list[ScriptedReply]:
    script: list[ScriptedReply] = []
    for turn in range(turns):
        batch = [
            ToolCall(id=f"t{turn}c{n}", name="wait_ms", input={"ms": ms}) for n in range(calls)
        ]
        script += [ScriptedReply(tool_calls=batch), ScriptedReply(text="done")]
    return script


async def _turn_seconds(url: str, *, concurrency: int, calls: int, ms: int, reps: int) -> float:
    """Median wall seconds of `reps` turns, each on a session of its own."""
    store = await SqlStore.open(url)
    model = ScriptedModel(_script(calls, ms, reps), keep_requests=False)
    runtime = Runtime(store, model, agent=AGENT, tool_concurrency=concurrency, poll_interval=0.01)
    walls: list[float] = []
    try:
        async with runtime:
            for rep in range(reps):
                session = runtime.session(AGENT, f"bench:{concurrency}:{ms}:{rep}")
                started = time.perf_counter()
                result = await session.turn("look them up")
                walls.append(time.perf_counter() - started)
                if result.status != TurnStatus.COMPLETED:
                    raise SystemExit(f"a benchmark turn ended {result.status}: {result.error}")
    finally:
        await store.close()
    return statistics.median(walls)


async def _site(site: Site, args: argparse.Namespace) -> list[str]:
    await site.create()
    try:
        rows = []
        for concurrency in (1, SIDE_BY_SIDE):
            options = {"concurrency": concurrency, "calls": args.calls, "reps": args.reps}
            floor = await _turn_seconds(site.engine_url, ms=0, **options)
            wall = await _turn_seconds(site.engine_url, ms=args.tool_ms, **options)
            rows.append((concurrency, wall, wall - floor))
        serial_tool = rows[0][2]
        lines = []
        for concurrency, wall, tool_time in rows:
            ratio = serial_tool / tool_time if tool_time > 0 else float("inf")
            lines.append(
                f"{site.name:<9} {concurrency:>11} {wall * 1000:>9.0f} {tool_time * 1000:>12.0f}"
                f" {ratio:>14.2f}x"
            )
        return lines
    finally:
        site.drop()


async def main(args: argparse.Namespace) -> int:
    print(
        f"{args.calls} calls of {args.tool_ms} ms each per turn, median of {args.reps} turns"
        f" (one call's wait: {args.tool_ms} ms; all of them one after another:"
        f" {args.calls * args.tool_ms} ms)"
    )
    print(
        f"{'database':<9} {'concurrency':>11} {'turn ms':>9} {'tool time ms':>12} {'vs serial':>15}"
    )
    for site in sites_from(args):
        for line in await _site(site, args):
            print(line)
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.parallel_tools", description=__doc__)
    add_site_arguments(parser)
    parser.add_argument("--calls", type=int, default=4, help="calls per batch (default 4)")
    parser.add_argument("--tool-ms", type=int, default=200, help="each call's wait (default 200)")
    parser.add_argument("--reps", type=int, default=5, help="turns per cell (default 5)")
    return parser.parse_args(argv)


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(parse_args())))
