"""`python -m bench.many_workers`: the many-workers chaos run at the issue's full size.

One `bot serve` (`RUN_TURNS=false`) and three `bot worker` processes on a PostgreSQL and a Redis
started for the run (private servers on free ports, their files in a temporary directory, gone
at the end; the machine's own servers are never touched). 200 sessions of three turns each (a
park answered by the requester, a confirmed write, a local write) arrive while a random worker
is SIGKILLed every second for 30 s and restarted at once, then while Redis is restarted, then
while PostgreSQL is restarted (immediate shutdown). Then everything is checked as
`tests/integration/test_many_workers.py` checks it at CI size (`tests.support.chaos_fleet`):
every turn completed exactly once, every reply and approval posted once, every provider call
and local write once, nothing left queued or running.

Unlike the other benchmarks this one is a check: it exits 1 when a promise broke, printing the
story of the first threads that show it (the seed reruns the same choices).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.support.chaos_fleet import ChaosFailure, ChaosPlan, Outcome, run_chaos
from tests.support.private_services import PrivatePostgres, PrivateRedis, services_missing


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.many_workers", description=__doc__)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0, help="how long workers are killed")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-every", type=float, default=1.0)
    parser.add_argument("--settle", type=float, default=600.0, help="bound after the restarts")
    parser.add_argument("--lease-ttl", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=time.time_ns() % 1_000_000)
    return parser.parse_args(argv)


def report(plan: ChaosPlan, outcome: Outcome) -> str:
    restarts = ", ".join(f"{name} down {took:.1f} s" for name, took in outcome.restarts.items())
    lines = [
        f"many workers: {plan.sessions} sessions x 3 turns, {plan.workers} workers, "
        f"seed {plan.seed}, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        f"  chaos       {outcome.kills} workers SIGKILLed over {plan.killing:.0f} s; {restarts}",
        f"  settled     {outcome.settled_after:.1f} s after PostgreSQL came back; "
        f"{outcome.seconds:.0f} s in all",
        f"  turns       {outcome.turns} completed, each once (turn rows and message log)",
        f"  Slack       every reply and approval posted once; {outcome.clicks} clicks",
        f"  effects     {outcome.provider_calls} provider calls, none twice; "
        f"{outcome.uncertain} receipts left uncertain for an operator",
        f"  local       {outcome.notes} local writes, one per session",
    ]
    return "\n".join(lines)


async def _run(args: argparse.Namespace) -> int:
    plan = ChaosPlan(
        sessions=args.sessions,
        workers=args.workers,
        killing=args.seconds,
        kill_every=args.kill_every,
        settle=args.settle,
        lease_ttl=args.lease_ttl,
        seed=args.seed,
    )
    postgres = await asyncio.to_thread(PrivatePostgres().start)
    redis = await asyncio.to_thread(PrivateRedis().start)
    try:
        with tempfile.TemporaryDirectory(prefix="bot-chaos-") as workdir:
            outcome = await run_chaos(plan, postgres, redis, Path(workdir))
    except ChaosFailure as failure:
        print(f"FAILED (seed {plan.seed}): {failure}", file=sys.stderr)
        return 1
    finally:
        await asyncio.to_thread(redis.stop)
        await asyncio.to_thread(postgres.close)
    print(report(plan, outcome))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = services_missing()
    if missing:
        print(f"cannot start private PostgreSQL / Redis servers: {missing}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.ERROR)
    return asyncio.run(_run(args))


if __name__ == "__main__":
    sys.exit(main())
