"""Ack latency of `/slack/events` under a burst of signed events while the turns run.

    python -m bench.ack_latency [--rate 200] [--seconds 10] [--db sqlite|postgres]
        [--mode split|embedded|queue-only] [--web-processes N]

Processes on this machine, as in production: the web side served the way `bot serve` serves it
(uvicorn with its loop and parser, `--web-processes` like WEB_CONCURRENCY; the real engine on
SQLite or PostgreSQL, the scripted model); the worker side, with the Web API stand-in and (split
mode) `bot worker`; and Slack, sending `rate` signed `app_mention` events per second, each in a
new thread, timing every response. This process only coordinates. Reported: p50/p90/p99/max ack
time, non-200 answers, and how many of the turns finished (and were rendered) within the drain
window after the burst.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

SECRET = "bench-signing-secret"
CHANNEL = "C0BENCH"
DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


# -- the Slack side (second process) -----------------------------------------------------------


async def slack_side(rate: float, seconds: float, app_url: str) -> None:
    """Slack sending events: only this, so the timings are not skewed by other work here.

    aiohttp rather than httpx: at hundreds of requests a second the client's own overhead would
    otherwise show up in the figures.
    """
    import aiohttp

    from bot.testing import SlackDriver
    from bot.testing.signing import sign_request

    driver = SlackDriver(app_url, SECRET, standin=None)
    await driver.aclose()
    latencies: list[float] = []
    sent_at: list[float] = []
    statuses: dict[int, int] = {}
    total = int(rate * seconds)
    connector = aiohttp.TCPConnector(limit=500)
    async with aiohttp.ClientSession(connector=connector) as http:
        start = time.perf_counter() + 0.2

        async def one(i: int) -> None:
            await asyncio.sleep(max(0.0, start + i / rate - time.perf_counter()))
            ts = f"{1_700_000_000 + i}.000100"
            event = driver.mention_event(f"U{i % 50:04d}", f"bench {i}", channel=CHANNEL, ts=ts)
            body = json.dumps(driver.envelope(event))
            headers = {"Content-Type": "application/json", **sign_request(SECRET, body)}
            sent = time.perf_counter()
            try:
                async with http.post(driver.url, data=body.encode(), headers=headers) as response:
                    await response.read()
                    statuses[response.status] = statuses.get(response.status, 0) + 1
            except aiohttp.ClientError:
                statuses[0] = statuses.get(0, 0) + 1
            latencies.append(time.perf_counter() - sent)
            sent_at.append(sent - start)

        await asyncio.gather(*(one(i) for i in range(total)))
        sent_for = time.perf_counter() - start
    result = {
        "latencies": latencies,
        "sent_at": sent_at,
        "statuses": statuses,
        "sent_for": sent_for,
    }
    print(json.dumps(result), flush=True)


# -- the bot side (this process) ---------------------------------------------------------------


def bench_agent() -> tuple[Any, Any]:
    from agent import Agent, ScriptedModel, ScriptedReply, ToolCall, tool

    @tool
    async def check(item: str) -> dict[str, Any]:
        """Look something up."""
        return {"item": item, "ok": True}

    call = ToolCall(id="c1", name="check", input={"item": "x"})
    script = [
        ScriptedReply(text=["Checking."], tool_calls=[call]),
        ScriptedReply(text=["Done ", "checking."]),
    ]
    model = ScriptedModel(script, keep_requests=False)
    return Agent(name="bench", instructions="Bench.", tools=[check]), model


def bench_settings(url: str, api_url: str, *, run_turns: bool = True) -> Any:
    from bot.core.settings import Settings

    return Settings(
        DATABASE_URL=url,
        SLACK_BOT_TOKEN=SecretStr("xoxb-bench"),
        SLACK_SIGNING_SECRET=SecretStr(SECRET),
        SLACK_API_URL=api_url,
        RUN_TURNS=run_turns,
    )


async def worker_side(url: str, embedded: bool) -> None:
    """The Slack Web API stand-in, and (split mode) `bot worker` with the benchmark's agent,
    running and rendering what the web process queued. Started at a lower CPU priority: on
    production hardware web and worker processes do not share two cores."""
    from bot.app import open_bot
    from bot.testing import SlackStandIn

    os.nice(10)
    async with SlackStandIn() as standin:
        print(json.dumps({"api_url": standin.api_url}), flush=True)
        bot = None
        if not embedded:
            agent, model = bench_agent()
            settings = bench_settings(url, standin.api_url)
            bot = await open_bot(settings, agent=agent, model=model, worker=True)
            await bot.start()
        try:
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        finally:
            if bot is not None:
                await bot.close()
        replies = [m for m in standin.bot_messages(CHANNEL) if "Done" in m.text]
        print(json.dumps({"rendered": len(replies), "calls": len(standin.calls)}), flush=True)


def web_app() -> Any:
    """The web processes' app factory (`bot serve`'s, with the benchmark's agent and model):
    settings from the environment the coordinator set."""
    import logging

    from bot.app import open_bot, serving_app
    from bot.core.logs import setup_logging
    from bot.core.settings import Settings

    settings = Settings()
    setup_logging(level="ERROR", fmt="text", secrets=settings.secrets())
    logging.getLogger("uvicorn.error").setLevel(logging.ERROR)

    async def opener() -> Any:
        agent, model = bench_agent()
        return await open_bot(settings, agent=agent, model=model)

    return serving_app(opener, freeze_heap=True)


def web_side(port: int, processes: int) -> None:
    """Serve exactly as `bot serve` does (uvicorn, its loop and parser, `processes` processes)."""
    from bot.cli.commands import run_web

    run_web("bench.ack_latency:web_app", host="127.0.0.1", port=port, processes=processes)


async def bot_side(args: argparse.Namespace) -> dict[str, Any]:
    """Coordinate: the database, the worker side, the web processes, then Slack's burst, then
    wait for the turns to drain. This process serves nothing, so its polling costs the web
    processes nothing but the two COUNT queries a second it sends the database."""
    from bench.databases import ThrowawayPostgres, sqlalchemy_url

    tmp = tempfile.mkdtemp(prefix="ack-bench-")
    server = ThrowawayPostgres(os.environ.get("BOT_BENCH_POSTGRES_URL", DEFAULT_POSTGRES))
    if args.db == "sqlite":
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
    else:
        url = sqlalchemy_url(await asyncio.to_thread(server.create, "ack"))
    try:
        return await _measure(args, url)
    finally:
        await asyncio.to_thread(server.drop)
        shutil.rmtree(tmp, ignore_errors=True)


async def _measure(args: argparse.Namespace, url: str) -> dict[str, Any]:
    from storage import SqlStore, upgrade_database

    await upgrade_database(url)
    split = args.mode != "embedded"
    worker = await _spawn("--worker-side", url, args.mode)
    assert worker.stdout is not None
    assert worker.stdin is not None
    api_url = json.loads(await worker.stdout.readline())["api_url"]
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": api_url,
        "RUN_TURNS": "false" if split else "true",
    }
    web = await _spawn("--web-side", str(port), str(args.web_processes), env=env)
    app_url = f"http://127.0.0.1:{port}"
    store = await SqlStore.open(url)
    try:
        await _until_healthy(app_url, web)
        peer = await _spawn(
            "--slack-side", app_url, "--rate", str(args.rate), "--seconds", str(args.seconds)
        )
        roles = {"web": web.pid, "worker side": worker.pid, "slack side": peer.pid}
        before = _cpu_by_role(roles)
        assert peer.stdout is not None
        load = json.loads(await peer.stdout.readline())
        cpu = _cpu_delta(before, _cpu_by_role(roles))
        await peer.wait()
        burst_end = time.perf_counter()
        total = int(args.rate * args.seconds)
        done = await store.run_sync(_completed_turns)
        while args.mode != "queue-only" and time.perf_counter() - burst_end < args.drain:
            done = await store.run_sync(_completed_turns)
            if done >= total and not await store.run_sync(_active_targets):
                break
            await asyncio.sleep(0.5)
        drained = time.perf_counter() - burst_end
    finally:
        await store.close()
        if web.returncode is None:
            web.terminate()
        await web.wait()
    worker.stdin.write(b"done\n")
    await worker.stdin.drain()
    rendered = json.loads(await worker.stdout.readline())
    await worker.wait()
    return {
        "db": args.db,
        "mode": args.mode,
        "web_processes": args.web_processes,
        "load": load,
        "completed": done,
        "total": total,
        "drained": drained,
        "cpu": cpu,
        **rendered,
    }


def _completed_turns(conn: Any) -> int:
    from sqlalchemy import func, select

    from storage.sql.schema import turns

    query = select(func.count()).select_from(turns).where(turns.c.status == "completed")
    return int(conn.execute(query).scalar_one())


def _active_targets(conn: Any) -> int:
    from sqlalchemy import func, select

    from storage.delivery.schema import delivery_targets

    active = delivery_targets.c.active == 1
    return int(conn.execute(select(func.count()).where(active)).scalar_one())


def _cpu_by_role(roles: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each role's process tree, and by PostgreSQL's backends (Linux
    /proc; empty elsewhere). Where a burst's two cores go is most of what the figures mean."""
    stats: dict[int, tuple[int, str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name, rest = raw[raw.index("(") + 1 : raw.rindex(")")], raw[raw.rindex(")") + 2 :].split()
        stats[int(entry.name)] = (int(rest[1]), name, (int(rest[11]) + int(rest[12])) / tick)
    if not stats:
        return {}

    def tree(root: int) -> float:
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            total += stats[pid][2] if pid in stats else 0.0
            todo.extend(child for child, (ppid, _, _) in stats.items() if ppid == pid)
        return total

    out = {role: tree(pid) for role, pid in roles.items()}
    out["postgres"] = sum(cpu for _, name, cpu in stats.values() if name.startswith("postgres"))
    return out


def _cpu_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {role: round(after[role] - before.get(role, 0.0), 2) for role in after}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _until_healthy(app_url: str, web: asyncio.subprocess.Process) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            if web.returncode is not None:
                raise RuntimeError("the web process exited while starting")
            try:
                async with http.get(f"{app_url}/healthz") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the web process did not become healthy within 60 s")


async def _spawn(*argv: str, env: dict[str, str] | None = None) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.ack_latency",
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        limit=1 << 24,  # the Slack side's one line holds every timing
    )


def report(result: dict[str, Any], rate: float, seconds: float) -> str:
    ms = sorted(x * 1000 for x in result["load"]["latencies"])

    def pct(p: float) -> float:
        return float(ms[min(len(ms) - 1, round(p / 100 * (len(ms) - 1)))])

    statuses = result["load"]["statuses"]
    by_second: dict[int, list[float]] = {}
    for sent, latency in zip(result["load"]["sent_at"], result["load"]["latencies"], strict=True):
        by_second.setdefault(int(sent), []).append(latency * 1000)
    per_second = " ".join(
        f"{sorted(v)[min(len(v) - 1, round(0.99 * (len(v) - 1)))]:.0f}"
        for _, v in sorted(by_second.items())
    )
    return "\n".join(
        [
            f"ack latency of /slack/events — {rate:g} signed events/s for {seconds:g} s "
            f"({len(ms)} events, sent over {result['load']['sent_for']:.1f} s), "
            f"{result['db']}, {result['mode']}",
            f"  p50 {pct(50):.1f} ms   p90 {pct(90):.1f} ms   p99 {pct(99):.1f} ms   "
            f"max {ms[-1]:.1f} ms   mean {statistics.fmean(ms):.1f} ms   "
            f"({result['web_processes']} web process{'es' if result['web_processes'] > 1 else ''})",
            f"  p99 in each second of the burst (ms): {per_second}",
            f"  responses: {', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))}",
            f"  turns completed: {result['completed']}/{result['total']} "
            f"({result['drained']:.1f} s after the burst); replies rendered: {result['rendered']}",
            f"  Slack API calls served by the stand-in: {result['calls']}",
            "  CPU seconds during the burst: "
            + ", ".join(f"{role} {cpu:.1f}" for role, cpu in result["cpu"].items()),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ack_latency", description=__doc__)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds to wait for turns")
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--web-processes", type=int, default=1, help="`bot serve` processes (WEB_CONCURRENCY)"
    )
    parser.add_argument(
        "--mode",
        choices=("embedded", "split", "queue-only"),
        default="split",
        help="embedded: the web process also runs the turns; split: a `bot worker` process does; "
        "queue-only: nothing runs them (the web process alone)",
    )
    parser.add_argument("--slack-side", metavar="APP_URL", help=argparse.SUPPRESS)
    parser.add_argument("--worker-side", nargs=2, metavar=("URL", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--web-side", nargs=2, metavar=("PORT", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.web_side:
        web_side(int(args.web_side[0]), int(args.web_side[1]))
        return 0
    if args.worker_side:
        asyncio.run(worker_side(args.worker_side[0], args.worker_side[1] != "split"))
        return 0
    if args.slack_side:
        asyncio.run(slack_side(args.rate, args.seconds, args.slack_side))
        return 0
    import logging

    logging.basicConfig(level=logging.ERROR)
    result = asyncio.run(bot_side(args))
    if args.json:
        print(json.dumps({k: v for k, v in result.items() if k != "load"}))
    print(report(result, args.rate, args.seconds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
