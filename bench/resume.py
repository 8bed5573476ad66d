"""`python -m bench.resume`: what it costs a worker to resume a long session, up to the first model
call, next to the raw floor measured in the same run.

A turn is queued on a pre-populated session of N messages; the clock runs from the queue's commit
to the moment the engine calls the model: lease, the transcript's recent end, the turn's steps,
the opening commit and the request, everything a worker does before the model can answer. The
floor is the one read no resume can skip, done with the bare driver: the same recent end of the
transcript (`CONTEXT_MESSAGES` rows from a turn's start), bodies parsed as JSON. The target is a
cost that does not grow with N (`growth` stays near 1x) and stays within a few times the floor.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from collections.abc import Callable

import psycopg

from agent import (
    DEFAULT_CONTEXT_MESSAGES,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    TurnInput,
    TurnStatus,
)
from agent.seams import ModelRequest
from bench.databases import PostgresSite, Site, SqliteSite, add_site_arguments, sites_from
from bench.raw_floor import connect_sqlite
from bench.timing import summarise
from bench.workload import BENCH_AGENT, OPENING_TEXT, history
from storage import SqlStore
from storage.sql.dialects import SQLITE_BUSY_TIMEOUT_MS

DEFAULT_SIZES = (10, 1_000, 5_000)
TAIL_SQL = (
    "SELECT body FROM messages WHERE session_key = {p} AND idx >= coalesce(("
    "SELECT idx FROM messages WHERE session_key = {p} AND idx <= ("
    "SELECT max(idx) FROM messages WHERE session_key = {p}) + 1 - {p} "
    "AND role IN ('user', 'trigger') ORDER BY idx DESC LIMIT 1), 0) ORDER BY idx"
)


def _floor_reader(site: Site) -> Callable[[str], float]:
    """Seconds to read and parse a session's recent end with the bare driver."""
    if isinstance(site, SqliteSite):
        conn = connect_sqlite(site.floor_path, SQLITE_BUSY_TIMEOUT_MS)
        query = TAIL_SQL.format(p="?")

        def sqlite_read(key: str) -> float:
            started = time.perf_counter()
            rows = conn.execute(query, (key, key, key, DEFAULT_CONTEXT_MESSAGES)).fetchall()
            [json.loads(body) for (body,) in rows]
            return time.perf_counter() - started

        return sqlite_read
    assert isinstance(site, PostgresSite)
    pg = psycopg.connect(site.floor_conninfo, autocommit=True)
    pg_query = TAIL_SQL.format(p="%s")

    def postgres_read(key: str) -> float:
        started = time.perf_counter()
        rows = pg.execute(pg_query, (key, key, key, DEFAULT_CONTEXT_MESSAGES)).fetchall()
        [json.loads(body) for (body,) in rows]
        return time.perf_counter() - started

    return postgres_read


class FirstCall:
    """A zero-latency model that notes when the engine first asks it anything."""

    def __init__(self) -> None:
        self.at: float | None = None
        self.model = ScriptedModel(responder=self._respond, keep_requests=False)

    def _respond(self, request: ModelRequest, step: int) -> ScriptedReply:
        if self.at is None:
            self.at = time.perf_counter()
        return ScriptedReply(text="done")


async def _resume(runtime: Runtime, first: FirstCall, key: str) -> float:
    first.at = None
    runtime.session(BENCH_AGENT, key)
    turn_id = uuid.uuid4().hex
    await runtime.store.enqueue_turn(key, turn_id, TurnInput(text=OPENING_TEXT))
    queued = time.perf_counter()
    runtime.kick(key)
    result = await runtime.wait_turn(key, turn_id)
    if result.status != TurnStatus.COMPLETED or first.at is None:
        raise RuntimeError(f"resume on {key!r} ended {result.status}: {result.error}")
    return first.at - queued


async def run_site(site: Site, sizes: tuple[int, ...], reps: int) -> list[str]:
    await site.create()
    try:
        keys = {n: [f"resume:{n}:{r}" for r in range(reps + 1)] for n in sizes}
        site.populate([(k, history(n)) for n in sizes for k in keys[n]])
        floor = _floor_reader(site)
        store = await SqlStore.open(site.engine_url)
        first = FirstCall()
        runtime = Runtime(store, first.model, agent=BENCH_AGENT, recovery_interval=3600)
        engine: dict[int, list[float]] = {n: [] for n in sizes}
        raw: dict[int, list[float]] = {n: [] for n in sizes}
        try:
            async with runtime:
                for n in sizes:  # one warm-up per size, not measured
                    await _resume(runtime, first, keys[n][0])
                    floor(keys[n][0])
                for rep in range(1, reps + 1):
                    for n in sizes:
                        engine[n].append(await _resume(runtime, first, keys[n][rep]))
                        raw[n].append(floor(keys[n][rep]))
        finally:
            await store.close()
        base = summarise(engine[sizes[0]]).median
        lines = []
        for n in sizes:
            e, f = summarise(engine[n]), summarise(raw[n])
            lines.append(
                f"{site.name:<9} {n:>8,} {e.median * 1000:>10.2f} ±{e.spread:>4.0%} "
                f"{f.median * 1000:>9.2f} ±{f.spread:>4.0%} {e.median / f.median:>7.1f}x "
                f"{e.median / base:>7.2f}x"
            )
        return lines
    finally:
        site.drop()


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.resume", description=__doc__)
    add_site_arguments(parser)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=DEFAULT_SIZES,
        help="transcript sizes, comma-separated, even, smallest first",
    )
    args = parser.parse_args(argv)
    sites = sites_from(args)
    print(
        f"resume to the first model call (CONTEXT_MESSAGES={DEFAULT_CONTEXT_MESSAGES}, "
        f"median of {args.reps}, ± median absolute deviation)"
    )
    print(
        f"{'database':<9} {'messages':>8} {'engine ms':>16} {'floor ms':>15} {'ratio':>8} "
        f"{'growth':>8}"
    )
    for site in sites:
        for line in await run_site(site, args.sizes, args.reps):
            print(line, flush=True)
    print("growth: engine cost at this size / at the smallest; target: resume <= 10 ms, flat")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
