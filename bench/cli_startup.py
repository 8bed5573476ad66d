"""How fast the command line answers: `bot --help`, `bot approvals --help` and `bot approvals`
against a migrated SQLite file, each a fresh process, beside `python -c pass` (the interpreter's
own start) in the same run.

Every repetition runs each command once, in turn, so a change in the machine's load falls on all
of them alike; the figures are medians over the repetitions with their spread (median absolute
deviation), wall time and CPU time (user + system, the children's rusage), and each command's
ratio to the interpreter's start (the median of per-repetition ratios). The commands run from a
fresh folder with no settings but the database's URL, as an operator runs them. A measurement,
not a test: it exits 0 whatever the figures.

    python -m bench.cli_startup                # 15 repetitions
    python -m bench.cli_startup --runs 5
    python -m bench.cli_startup --source DIR   # the `bot` of another checkout (`python -m bot`)
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.timing import Summary, summarise

TARGET_SECONDS = 1.0
"""`bot --help` and the operator commands should answer well within this (wall, median)."""


@dataclass(frozen=True, kw_only=True)
class Command:
    name: str
    argv: list[str]


@dataclass(frozen=True, kw_only=True)
class Timed:
    name: str
    wall: Summary
    cpu: Summary
    wall_ratio: Summary
    cpu_ratio: Summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cli_startup",
        description="Start-up time of the bot's command line, next to the interpreter's own.",
    )
    parser.add_argument("--runs", type=int, default=15, help="repetitions (default 15)")
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        metavar="DIR",
        help="time `python -m bot` of this checkout instead of the installed `bot` script",
    )
    return parser.parse_args(argv)


def bot_argv(source: Path | None) -> list[str]:
    script = Path(sys.executable).with_name("bot")
    if source is None and script.exists():
        return [str(script)]
    return [sys.executable, "-m", "bot"]


def environment(source: Path | None, home: Path) -> dict[str, str]:
    """No settings of this shell's (no DATABASE_URL, tokens or .env), as on a fresh login."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "LANG": "C.UTF-8"}
    if source is not None:
        env["PYTHONPATH"] = str(source.resolve())
    return env


def commands(bot: list[str], database: str) -> list[Command]:
    return [
        Command(name="python -c pass", argv=[sys.executable, "-c", "pass"]),
        Command(name="bot --help", argv=[*bot, "--help"]),
        Command(name="bot approvals --help", argv=[*bot, "approvals", "--help"]),
        Command(
            name="bot approvals (SQLite)", argv=[*bot, "approvals", "--database-url", database]
        ),
    ]


def run_once(command: Command, cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run; a failing command stops the benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command.argv, cwd=cwd, env=env, capture_output=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{command.name} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(cmds: Sequence[Command], runs: int, cwd: Path, env: dict[str, str]) -> list[Timed]:
    walls: dict[str, list[float]] = {c.name: [] for c in cmds}
    cpus: dict[str, list[float]] = {c.name: [] for c in cmds}
    for command in cmds:  # once untimed: the first run compiles bytecode and warms the caches
        run_once(command, cwd, env)
    for _ in range(runs):
        for command in cmds:
            wall, cpu = run_once(command, cwd, env)
            walls[command.name].append(wall)
            cpus[command.name].append(cpu)
    base = cmds[0].name
    return [
        Timed(
            name=c.name,
            wall=summarise(walls[c.name]),
            cpu=summarise(cpus[c.name]),
            wall_ratio=summarise([w / b for w, b in zip(walls[c.name], walls[base], strict=True)]),
            cpu_ratio=summarise(
                [u / b if b else 0.0 for u, b in zip(cpus[c.name], cpus[base], strict=True)]
            ),
        )
        for c in cmds
    ]


def render(results: list[Timed], runs: int, load: tuple[float, float], source: Path | None) -> str:
    header = f"{'command':<24} {'wall s':>13} {'x pass':>7} {'cpu s':>13} {'x pass':>7}"
    what = f"`python -m bot` of {source}" if source else "the installed `bot` script"
    lines = [
        f"CLI start-up: {what}; median of {runs} runs each, interleaved; ±: median absolute "
        "deviation.",
        f"load average (1 min) at start {load[0]:.2f}, at end {load[1]:.2f} on "
        f"{os.cpu_count() or 1} cores: other work on the machine inflates wall time most.",
        "",
        header,
        "-" * len(header),
    ]
    for t in results:
        lines.append(
            f"{t.name:<24} {_cell(t.wall):>13} {t.wall_ratio.median:>6.1f}x "
            f"{_cell(t.cpu):>13} {t.cpu_ratio.median:>6.1f}x"
        )
    lines.append("")
    for t in results[1:]:
        met = "MET" if t.wall.median < TARGET_SECONDS else "NOT MET"
        lines.append(f"{t.name}: under {TARGET_SECONDS:g} s {met} ({t.wall.median:.2f} s)")
    return "\n".join(lines)


def _cell(summary: Summary) -> str:
    return f"{summary.median:.3f} ±{summary.spread * 100:.0f}%"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    bot = bot_argv(args.source)
    with tempfile.TemporaryDirectory(prefix="bot-cli-startup-") as tmp:
        folder, home = Path(tmp) / "work", Path(tmp) / "home"
        folder.mkdir()
        home.mkdir()
        env = environment(args.source, home)
        database = f"sqlite+aiosqlite:///{Path(tmp) / 'bot.db'}"
        made = subprocess.run(
            [*bot, "db", "upgrade", "--database-url", database],
            cwd=folder,
            env=env,
            capture_output=True,
            check=False,
        )
        if made.returncode != 0:
            raise SystemExit(f"bot db upgrade failed: {made.stderr.decode()[-500:]}")
        load_before = os.getloadavg()[0]
        results = measure(commands(bot, database), max(1, args.runs), folder, env)
        load = (load_before, os.getloadavg()[0])
    print(render(results, max(1, args.runs), load, args.source))
    return 0


if __name__ == "__main__":
    sys.exit(main())
