"""`python -m bench`: the step-cost benchmark on SQLite and PostgreSQL, printed as one table
(`--cli-startup`: the command line's start-up instead, `bench/cli_startup.py`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from bench.databases import add_site_arguments, sites_from
from bench.report import profile_text, render
from bench.runner import Config, SiteResult, run_site

DEFAULT_SIZES = (10, 1_000, 10_000)
DEFAULT_STEPS, QUICK_STEPS = 81, 41
DEFAULT_REPS, QUICK_REPS = 15, 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Cost of one durable step (engine vs raw-driver floor) at several transcript "
        "sizes, on SQLite and PostgreSQL.",
    )
    parser.add_argument("--quick", action="store_true", help="fewer turns and steps (< 30 s)")
    add_site_arguments(parser)
    parser.add_argument(
        "--steps",
        type=int,
        help=f"timed steps per turn (default {DEFAULT_STEPS}, quick {QUICK_STEPS}); "
        "one model step and one tool step per tool call, so rounded to an odd number",
    )
    parser.add_argument(
        "--reps", type=int, help=f"turns per cell (default {DEFAULT_REPS}, quick {QUICK_REPS})"
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: tuple(int(x) for x in s.split(",")),
        default=DEFAULT_SIZES,
        help="transcript sizes, comma-separated, even, smallest first (default 10,1000,10000)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the engine turns at the largest size"
    )
    parser.add_argument(
        "--cli-startup",
        action="store_true",
        help="instead: how fast the command line answers (bench/cli_startup.py, whose own "
        "options `python -m bench.cli_startup --help` lists; --quick: 5 runs)",
    )
    return parser.parse_args(argv)


def config_from(args: argparse.Namespace) -> Config:
    steps = args.steps or (QUICK_STEPS if args.quick else DEFAULT_STEPS)
    reps = args.reps or (QUICK_REPS if args.quick else DEFAULT_REPS)
    sizes = tuple(sorted(args.sizes))
    if any(n < 2 or n % 2 for n in sizes):
        raise SystemExit("--sizes: every size must be even and at least 2")
    return Config(
        sizes=sizes, reps=max(1, reps), calls=max(1, (steps - 1) // 2), profile=args.profile
    )


async def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    load_before = os.getloadavg()[0]
    results: list[SiteResult] = []
    for site in sites_from(args):
        results.append(await run_site(site, config))
    load = (load_before, os.getloadavg()[0])
    print(render(results, config, load, os.cpu_count() or 1))
    for done in results:
        text = profile_text(done)
        if text:
            print(text, file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.cli_startup:
        from bench import cli_startup

        return cli_startup.main(["--runs", "5"] if args.quick else [])
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
