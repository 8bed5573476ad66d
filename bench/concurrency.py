"""`python -m bench.concurrency`: many sessions' turns at once, engine next to the raw floor.

N sessions each run one turn of the workload (a zero-latency model asking for one tool call per
step, `2 x calls + 2` durable steps) all at once through one `Runtime` (as one worker process
would, `max_concurrent_sessions=N`). Printed: steps committed per second, and CPU per step (the
process's CPU time over the run, every thread included, divided by the steps).

The floor writes the same rows with the bare driver in the same run: on SQLite one connection
(SQLite has one writer; more connections only contend for its lock), on PostgreSQL one connection
per thread on as many threads as the engine's pool has connections (`POSTGRES_POOL_SIZE`), each
taking sessions from a shared queue. The ratio engine steps/s ÷ floor steps/s says what the
engine's concurrency costs; issue 14's target is >= 0.5 on both databases, and CPU per step
within 2x the floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import queue
import sys
import threading
import time
import uuid

from agent import Runtime, ScriptedModel, TurnInput, TurnStatus
from bench.databases import PostgresSite, Site, SqliteSite, add_site_arguments, sites_from
from bench.raw_floor import PostgresFloor, RawFloor, SqliteFloor
from bench.workload import BENCH_AGENT, OPENING_TEXT, history, responder, steps_per_turn
from storage import SqlStore
from storage.sql.dialects import POSTGRES_POOL_SIZE, SQLITE_BUSY_TIMEOUT_MS

HISTORY = 2
"""Messages every session holds before its measured turn (the floor needs the session row)."""


def prefix(tag: str) -> str:
    return "floor" if tag.startswith("f") else "conc"


async def engine_run(url: str, sessions: int, calls: int, tag: str) -> tuple[float, float]:
    """(steps/s, CPU seconds per step) for `sessions` turns started together."""
    store = await SqlStore.open(url)
    model = ScriptedModel(responder=responder(calls), keep_requests=False)
    runtime = Runtime(
        store,
        model,
        agent=BENCH_AGENT,
        max_concurrent_sessions=sessions,
        recovery_interval=3600,
        # `wait_turn` polls the store every `poll_interval` for turns other processes run; here
        # every turn runs in this process, whose drains wake their waiters. The waiting is the
        # benchmark's, not a worker's (a worker waits on nothing), so it must not poll.
        poll_interval=3600,
    )
    keys = [f"{prefix(tag)}:{tag}:{i}" for i in range(sessions)]
    try:
        async with runtime:
            for key in keys:
                runtime.session(BENCH_AGENT, key)
            turn_ids = {key: uuid.uuid4().hex for key in keys}
            for key in keys:
                await store.enqueue_turn(key, turn_ids[key], TurnInput(text=OPENING_TEXT))
            cpu, started = time.process_time(), time.perf_counter()
            for key in keys:
                runtime.kick(key)
            results = await asyncio.gather(*(runtime.wait_turn(k, turn_ids[k]) for k in keys))
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    finally:
        await store.close()
    failed = [r for r in results if r.status != TurnStatus.COMPLETED]
    if failed:
        raise RuntimeError(f"{len(failed)} benchmark turns did not complete: {failed[0].error}")
    steps = sessions * steps_per_turn(calls)
    return steps / elapsed, cpu / steps


def floor_run(site: Site, sessions: int, calls: int, tag: str) -> tuple[float, float, int]:
    """(steps/s, CPU seconds per step, threads) writing the same rows with the bare driver."""
    threads = 1 if isinstance(site, SqliteSite) else POSTGRES_POOL_SIZE
    work: queue.SimpleQueue[str] = queue.SimpleQueue()
    for i in range(sessions):
        work.put(f"{prefix(tag)}:{tag}:{i}")

    def open_floor() -> RawFloor:
        if isinstance(site, SqliteSite):
            return SqliteFloor(site.floor_path, SQLITE_BUSY_TIMEOUT_MS)
        assert isinstance(site, PostgresSite)
        return PostgresFloor(site.floor_conninfo)

    def drain() -> None:
        floor = open_floor()  # on its thread: sqlite3 connections stay on the thread that made them
        try:
            while True:
                try:
                    key = work.get_nowait()
                except queue.Empty:
                    return
                floor.run_turn(key, HISTORY, calls)
        finally:
            floor.close()

    cpu, started = time.process_time(), time.perf_counter()
    workers = [threading.Thread(target=drain) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    steps = sessions * steps_per_turn(calls)
    return steps / elapsed, cpu / steps, threads


async def run_site(site: Site, sessions: int, calls: int, reps: int) -> list[str]:
    await site.create()
    lines = []
    try:
        tags = ["alone", *(f"{side}{rep}" for rep in range(reps) for side in "ef")]
        counts = {tag: 1 if tag == "alone" else sessions for tag in tags}
        site.populate(
            [
                (f"{prefix(tag)}:{tag}:{i}", history(HISTORY))
                for tag in tags
                for i in range(counts[tag])
            ]
        )
        # One session alone first: the figure a crowd of sessions should not fall below.
        alone, _ = await engine_run(site.engine_url, 1, calls, "alone")
        for rep in range(reps):
            engine, engine_cpu = await engine_run(site.engine_url, sessions, calls, f"e{rep}")
            floor, floor_cpu, threads = await asyncio.to_thread(
                floor_run, site, sessions, calls, f"f{rep}"
            )
            lines.append(
                f"{site.name:<9} {sessions:>8} {engine:>9,.0f} {floor:>9,.0f} "
                f"{engine / floor:>6.2f} {engine_cpu * 1e3:>8.2f} {floor_cpu * 1e3:>8.2f} "
                f"{engine_cpu / floor_cpu:>6.1f}x {alone:>7,.0f} {threads:>7}"
            )
    finally:
        site.drop()
    return lines


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__)
    add_site_arguments(parser)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--calls", type=int, default=4, help="tool calls per turn")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    sites = sites_from(args)
    print(
        f"{args.sessions} sessions at once, one turn each of {steps_per_turn(args.calls)} steps; "
        "one line per repetition"
    )
    print(
        f"{'database':<9} {'sessions':>8} {'engine/s':>9} {'floor/s':>9} {'ratio':>6} "
        f"{'eng CPU':>8} {'flr CPU':>8} {'CPU x':>7} {'alone/s':>7} {'threads':>7}"
    )
    print(f"{'':<9} {'':>8} {'steps':>9} {'steps':>9} {'':>6} {'ms/step':>8} {'ms/step':>8}")
    for site in sites:
        for line in await run_site(site, args.sessions, args.calls, args.reps):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
