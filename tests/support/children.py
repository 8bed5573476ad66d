"""Child Python processes for the tests that need a real one (a crash is a SIGKILL, a second
worker is a second process, a command is run as an operator runs it): one way to start them,
read their lines, and end them.

Children are asyncio subprocesses, so the test's event loop never blocks on their pipes. Each
runs a module of this repository (`python -m tests.support.crash_child …`) from its root, with
unbuffered output, so a line it prints is readable as soon as it is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: the children's working directory and import path."""

Process = asyncio.subprocess.Process


async def start(
    module: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdout: int | IO[bytes] = asyncio.subprocess.PIPE,
    stderr: int | IO[bytes] | None = asyncio.subprocess.PIPE,
    group: bool = False,
) -> Process:
    """`python -m module args…`; stdout a pipe unless given, stderr a pipe unless given (a log
    file, or None for this process's own). `env` is added to this process's environment.
    `group`: the child leads a process group of its own, for one that starts others
    (`kill_group` ends them all)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        cwd=ROOT,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
        stdout=stdout,
        stderr=stderr,
        start_new_session=group,
    )


@dataclass(frozen=True)
class Ran:
    """A child that ran to its end: its exit code and what it printed."""

    returncode: int
    stdout: str
    stderr: str


async def run(
    module: str, *args: str, env: Mapping[str, str] | None = None, within: float = 60
) -> Ran:
    """`python -m module args…` to its end, as an operator runs a command."""
    proc = await start(module, *args, env=env)
    out, err = await asyncio.wait_for(proc.communicate(), within)
    assert proc.returncode is not None
    return Ran(proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


async def wait_line(proc: Process, prefix: str, within: float = 30) -> str:
    """The child's first line starting with `prefix`; fails the test if it exits first."""
    assert proc.stdout is not None
    async with asyncio.timeout(within):
        while True:
            line = (await proc.stdout.readline()).decode()
            if not line:
                detail = ""
                if proc.stderr is not None:
                    detail = (await proc.stderr.read()).decode(errors="replace")[-2000:]
                pytest.fail(f"the child exited before printing {prefix!r}\n{detail}")
            if line.startswith(prefix):
                return line


async def finish(proc: Process, within: float = 90) -> list[str]:
    """Wait for the child to end by itself; its stdout lines. Fails unless it exited 0."""
    out, err = await asyncio.wait_for(proc.communicate(), within)
    assert proc.returncode == 0, (err or b"").decode(errors="replace")
    return out.decode().splitlines()


async def kill(proc: Process, within: float = 30) -> None:
    """SIGKILL: no cleanup, no finally blocks, an open transaction lost, as in a crash."""
    proc.kill()
    await asyncio.wait_for(proc.wait(), within)
    assert proc.returncode == -signal.SIGKILL


async def stop(proc: Process) -> None:
    """End a child politely (SIGTERM), or by SIGKILL if it takes more than 10 s."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def kill_group(proc: Process) -> None:
    """SIGKILL the child's whole process group (see `start(group=True)`): its own children too,
    so a failed test leaves none running."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
