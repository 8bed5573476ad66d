"""The bot as real processes (`tests.bot.app_child`), in either serving mode, for tests that
SIGKILL the process running the turns."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from tests.bot.harness import ONE_PROCESS, WEB_AND_WORKER
from tests.support import children
from tests.support.children import Process, stop, wait_line

__all__ = ["Process", "served", "spawn", "stop", "wait_line"]


@contextlib.asynccontextmanager
async def spawn(
    role: str,
    db_url: str,
    api_url: str,
    script: str,
    crash: str | None = None,
    *,
    port: int = 0,
    agent: str = "AGENT",
    lease_ttl: float = 1.0,
    timing: str = "fast",
    env: dict[str, str] | None = None,
    started_within: float = 30,
    log: Path | None = None,
) -> AsyncIterator[tuple[Process, int]]:
    """One child process; yields it and its HTTP port (0 for a worker), stops it on exit.
    `env`: added to this process's environment (e.g. `REDIS_URL`). `log`: a file its stderr
    (its log) is appended to, instead of this process's stderr."""
    args = [db_url, api_url, script, "--role", role, "--port", str(port), "--agent", agent]
    args += ["--lease-ttl", str(lease_ttl), "--timing", timing]
    if crash:
        args += ["--crash", crash]
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("ab")) if log is not None else None
        proc = await children.start("tests.bot.app_child", *args, env=env, stderr=stderr)
    try:
        line = await wait_line(proc, "PORT ", within=started_within)
        yield proc, int(line.split()[1])
    finally:
        await stop(proc)


@contextlib.asynccontextmanager
async def served(
    serving: str,
    db_url: str,
    api_url: str,
    script: str,
    crash: str | None = None,
    *,
    log: Path | None = None,
) -> AsyncIterator[tuple[Process, int]]:
    """The bot in `serving` mode; yields the process that runs the turns (the one to kill) and
    the port Slack posts to. `log`: a file the processes' logs are appended to."""
    if serving == ONE_PROCESS:
        async with spawn("one", db_url, api_url, script, crash, log=log) as (proc, port):
            yield proc, port
    elif serving == WEB_AND_WORKER:
        async with (
            spawn("web", db_url, api_url, script, log=log) as (_, port),
            spawn("worker", db_url, api_url, script, crash, log=log) as (worker, _),
        ):
            yield worker, port
    else:
        raise ValueError(f"unknown serving mode {serving!r}")
