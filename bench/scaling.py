"""`python -m bench.scaling`: turns per second with 1, 2 and 4 `bot worker` processes, and the
scaling ratio (turns/s with N workers over turns/s with one), from the same run.

Each worker count gets a fresh database. One `bot serve` (`RUN_TURNS=false`) queues `--turns`
mentions, each in a thread of its own, with no worker running; then the workers start and the
clock runs. A turn is three durable steps (model → `lookup_order` → model, the scripted model at
zero latency) and its reply is streamed into the Slack stand-in, so a worker does all of its real
work: leases, steps, event outbox, rendering. The workers run with the timings `bot worker` has
by default (1 s render polls, 30 s leases), not the tests' short ones.

turns/s is the slope of completed turns over time between 10 % and 90 % of them, so neither
the workers' start nor the last stragglers count; `rendered` is when the last reply was shown,
from the workers' start. With `--reps` the median is printed, with its median absolute
deviation.

PostgreSQL: by default a private server this run starts (and removes); `--db shared` uses the
server at `BOT_BENCH_POSTGRES_URL` (default `postgresql://postgres@127.0.0.1:5432/test`),
creating `bot_bench_<random>_scaling<N>` databases and dropping only those. Redis is always a
private one: the workers' stream and consumer group have fixed names, which another user's
workers on a shared Redis would read too. A measurement, not a test: the exit status is 0
whatever the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from bench.databases import postgres_server_url
from bot.testing import SlackDriver, SlackStandIn
from storage import upgrade_database
from tests.bot.harness import SECRET
from tests.support.chaos_fleet import Workforce, like_slack
from tests.support.private_services import PrivatePostgres, PrivateRedis, services_missing

CHANNEL = "C0SCALE"


@dataclass
class Run:
    workers: int
    turns_per_second: float
    rendered: float
    """Seconds from the workers' start until the last reply was shown."""


class Databases:
    """Where each run's database comes from: a server of its own, or a shared one."""

    def __init__(self, shared_url: str | None) -> None:
        self.shared = shared_url
        self.private: PrivatePostgres | None = None
        self.tag = secrets.token_hex(4)

    def where(self) -> str:
        return "shared server" if self.shared else "private server"

    def _admin(self) -> str:
        if self.shared:
            return make_url(self.shared).set(drivername="postgresql").render_as_string(False)
        assert self.private is not None
        return self.private.conninfo()

    def start(self) -> None:
        if not self.shared:
            self.private = PrivatePostgres().start()

    def close(self) -> None:
        if self.private is not None:
            self.private.close()

    @contextlib.asynccontextmanager
    async def database(self, name: str) -> AsyncIterator[tuple[str, str]]:
        """A migrated database for one run; yields its SQLAlchemy URL and conninfo; dropped."""
        full = f"bot_bench_{self.tag}_{name}"
        admin = self._admin()
        await asyncio.to_thread(_execute, admin, sql.SQL("CREATE DATABASE {}"), full)
        conninfo = make_url(admin).set(database=full).render_as_string(False)
        url = make_url(conninfo).set(drivername="postgresql+psycopg").render_as_string(False)
        try:
            await upgrade_database(url)
            yield url, conninfo
        finally:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            await asyncio.to_thread(_execute, admin, drop, full)


def _execute(conninfo: str, statement: sql.SQL, name: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(statement.format(sql.Identifier(name)))


def _counts(conninfo: str) -> tuple[int, int]:
    """(turns queued in all, turns completed)."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'completed') FROM turns"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def slope(samples: list[tuple[float, int]], total: int) -> float:
    """Completed turns per second between 10 % and 90 % of `total`."""
    low, high = 0.1 * total, 0.9 * total
    t_low = next(t for t, n in samples if n >= low)
    n_low = next(n for t, n in samples if n >= low)
    t_high, n_high = next((t, n) for t, n in samples if n >= high)
    return (n_high - n_low) / (t_high - t_low) if t_high > t_low else float("nan")


async def _until(check: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.1)


async def measure(
    workers: int, turns: int, databases: Databases, redis: PrivateRedis, logs: Path
) -> Run:
    async with (
        databases.database(f"scaling{workers}") as (url, conninfo),
        SlackStandIn() as standin,
        Workforce(
            url,
            standin.api_url,
            workers=workers,
            env={"REDIS_URL": redis.url},
            lease_ttl=30.0,
            script="LOOKUP",
            agent="AGENT",
            timing="production",
            start_workers=False,
            log=logs,
        ) as fleet,
        SlackDriver(fleet.app_url, SECRET, standin=standin) as slack,
    ):
        sending = asyncio.Semaphore(16)

        async def mention(i: int) -> None:
            async with sending:
                event = slack.mention_event(
                    f"U0S{i:05d}", f"order {i}?", channel=CHANNEL, ts=slack.new_ts()
                )
                await like_slack(lambda: slack.post_event(event))

        await asyncio.gather(*(mention(i) for i in range(turns)))
        queued, _ = await asyncio.to_thread(_counts, conninfo)
        assert queued == turns, f"{queued} of {turns} turns queued"

        began = time.monotonic()
        await fleet.start_workers()
        samples: list[tuple[float, int]] = []
        deadline = began + max(120.0, turns)
        while not samples or samples[-1][1] < turns:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{samples[-1][1]} of {turns} turns done")
            _, done = await asyncio.to_thread(_counts, conninfo)
            samples.append((time.monotonic() - began, done))
            await asyncio.sleep(0.2)

        def shown() -> bool:
            replies = [m for m in standin.bot_messages(CHANNEL) if "is a mug." in m.text]
            return len(replies) >= turns and not any(m.streaming for m in replies)

        await _until(shown, 120, "every reply shown")
        return Run(workers, slope(samples, turns), time.monotonic() - began)


def report(
    runs: dict[int, list[Run]], turns: int, where: str, reps: int, load: tuple[float, ...]
) -> str:
    base = statistics.median(r.turns_per_second for r in runs[min(runs)])
    lines = [
        f"scaling: {turns} turns per run (model -> tool -> model at zero latency, each reply "
        f"streamed to the Slack stand-in), PostgreSQL ({where}) + Redis (private), "
        f"{os.cpu_count()} cores, load average {load[0]:.1f} before",
        f"{'workers':>8} {'turns/s':>9} {'±':>6} {'ratio':>7} {'rendered':>9}",
    ]
    for workers, measured in runs.items():
        rates = [r.turns_per_second for r in measured]
        median = statistics.median(rates)
        spread = statistics.median(abs(r - median) for r in rates)
        rendered = statistics.median(r.rendered for r in measured)
        lines.append(
            f"{workers:>8} {median:>9.1f} {spread:>6.1f} {median / base:>6.2f}x {rendered:>8.1f}s"
        )
    lines.append(
        f"ratio = turns/s with N workers / turns/s with {min(runs)}; median of {reps} run(s)"
    )
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> int:
    shared = postgres_server_url()
    databases = Databases(shared if args.db == "shared" else None)
    load = os.getloadavg()
    await asyncio.to_thread(databases.start)
    redis = await asyncio.to_thread(PrivateRedis().start)
    runs: dict[int, list[Run]] = {n: [] for n in args.workers}
    try:
        with tempfile.TemporaryDirectory(prefix="bot-scaling-") as workdir:
            for _ in range(args.reps):
                for n in args.workers:  # worker counts interleaved: machine noise hits all
                    run = await measure(n, args.turns, databases, redis, Path(workdir) / "log")
                    runs[n].append(run)
                    print(f"  {n} worker(s): {run.turns_per_second:.1f} turns/s", file=sys.stderr)
    finally:
        await asyncio.to_thread(redis.stop)
        await asyncio.to_thread(databases.close)
    print(report(runs, args.turns, databases.where(), args.reps, load))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling", description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--workers",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=(1, 2, 4),
        help="worker counts, comma-separated (the first is the ratio's base)",
    )
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--db", choices=("private", "shared"), default="private")
    args = parser.parse_args(argv)
    missing = services_missing() if args.db == "private" else None
    if shutil.which("redis-server") is None:
        missing = "no `redis-server` on PATH"
    if missing:
        print(f"cannot start a private server: {missing}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
