"""Child Python processes for the tests that need a real one (a crash is a SIGKILL, a second
worker is a second process, a command is run as an operator runs it): one way to start them,
read their lines, and end them.

Each runs a module of this repository (`python -m tests.support.crash_child …`) from its root,
with unbuffered output, so a line it prints is readable as soon as it is printed. The test's
event loop never blocks on them: their pipes are read by the loop, and they are started on a
thread. (`asyncio.create_subprocess_exec` forks and waits for the exec on the loop's thread;
on a busy machine that held the loop up to 300 ms, which the loop watch rightly reported: the
loop was blocked, by the harness rather than by the code under test.)
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: the children's working directory and import path."""

PIPE = subprocess.PIPE


class Process:
    """A started child, as much of `asyncio.subprocess.Process` as the tests use: `pid`,
    `returncode`, `stdout`/`stderr` stream readers (for pipes), `wait`, `communicate`,
    `send_signal`, `kill`."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._exited: asyncio.Future[int] = loop.create_future()
        self._pipes: list[asyncio.BaseTransport] = []
        # One thread per child waits for its exit, as asyncio's own child watcher does; a
        # low-level one, whose start does not wait for the OS to run it (`Thread.start` does).
        _thread.start_new_thread(self._reap, (loop,))

    async def _connect(self) -> Process:
        if self._popen.stdout is not None:
            self.stdout = await self._reader(self._popen.stdout)
        if self._popen.stderr is not None:
            self.stderr = await self._reader(self._popen.stderr)
        return self

    async def _reader(self, pipe: IO[bytes]) -> asyncio.StreamReader:
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
        self._pipes.append(transport)
        return reader

    def _reap(self, loop: asyncio.AbstractEventLoop) -> None:
        code = self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the test's loop has closed
            loop.call_soon_threadsafe(_settle, self._exited, code)

    @property
    def returncode(self) -> int | None:
        return self._exited.result() if self._exited.done() else None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    async def communicate(self) -> tuple[bytes, bytes]:
        """Everything the child prints on its pipes, once it has exited."""
        out, err = await asyncio.gather(_read_all(self.stdout), _read_all(self.stderr))
        await self.wait()
        self.close()
        return out, err

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def close(self) -> None:
        """Stop reading its pipes (what it printed and was not read is dropped)."""
        for transport in self._pipes:
            transport.close()
        self._pipes.clear()


def _settle(exited: asyncio.Future[int], code: int) -> None:
    if not exited.done():
        exited.set_result(code)


async def _read_all(stream: asyncio.StreamReader | None) -> bytes:
    return b"" if stream is None else await stream.read()


async def start(
    module: str,
    *args: str,
    env: Mapping[str, str] | None = None,
    stdout: int | IO[bytes] = PIPE,
    stderr: int | IO[bytes] | None = PIPE,
    group: bool = False,
) -> Process:
    """`python -m module args…`; stdout a pipe unless given, stderr a pipe unless given (a log
    file, or None for this process's own). `env` is added to this process's environment.
    `group`: the child leads a process group of its own, for one that starts others
    (`kill_group` ends them all)."""
    argv = [sys.executable, "-m", module, *args]
    popen = await asyncio.to_thread(
        subprocess.Popen,
        argv,
        cwd=ROOT,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
        stdout=stdout,
        stderr=stderr,
        start_new_session=group,
    )
    return await Process(popen, asyncio.get_running_loop())._connect()


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
    proc.close()
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
    proc.close()


async def kill_group(proc: Process) -> None:
    """SIGKILL the child's whole process group (see `start(group=True)`): its own children too,
    so a failed test leaves none running."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
    proc.close()
