"""SIGTERM to `bot serve` with API readers open: every event stream ends with a last `closing`
frame (its reader reconnects with `Last-Event-ID` elsewhere), a POST waiting on its turn
answers 202 with what to poll, and the process exits well within its grace period, with no
error and no traceback in its output. Before, the streams held the process for the whole grace,
were then cut mid-stream, and uvicorn logged the cancellation as an error."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.cli.commands import SHUTDOWN_GRACE_SECONDS
from tests.api.conftest import BY_USER, TOKENS, client
from tests.api.sse_client import COMMENT, Frame, frames
from tests.bot.harness import SECRET, TOKEN, eventually
from tests.support import children

SSE = {"Accept": "text/event-stream"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def _serve(env: dict[str, str], log: Path) -> AsyncIterator[children.Process]:
    with log.open("wb") as out:
        proc = await children.start(
            "bot.cli.main", "serve", env=env, stdout=out, stderr=out, group=True
        )
    try:
        yield proc
    finally:
        await children.kill_group(proc)


async def _read_all(response: httpx.Response, seen: list[Frame]) -> None:
    async for item in frames(response, comments=True):
        seen.append(item)


@pytest.mark.parametrize("processes", ["1", "2"])
async def test_sigterm_ends_open_streams_with_a_last_frame_and_exits_within_the_grace(
    db_url, standin, tmp_path: Path, processes: str
) -> None:
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": standin.api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-unused",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": processes,
        "RUN_TURNS": "false",  # nothing runs the turn: the POST below waits as long as it may
        "API_TOKENS": json.dumps(TOKENS),
        "API_POLL_SECONDS": "0.2",
        "API_HEARTBEAT_SECONDS": "0.3",
        "API_TURN_WAIT_SECONDS": "60",
    }
    log = tmp_path / "serve.log"
    headers = {"Authorization": f"Bearer {BY_USER['alice']}"}
    async with (
        _serve(env, log) as proc,
        client(f"http://127.0.0.1:{port}", headers=headers, timeout=60) as alice,
    ):
        owners: set[str] = set()

        async def ready() -> bool:
            """Every web process serving (none still starting when the signal comes)."""
            if proc.returncode is not None:
                pytest.fail(f"bot serve exited {proc.returncode}:\n{log.read_text()}")
            async with client(f"http://127.0.0.1:{port}") as fresh:  # either process may take it
                with contextlib.suppress(httpx.TransportError):
                    owners.add((await fresh.get("/healthz")).json()["owner"])
            return len(owners) == int(processes)

        await eventually(ready, within=90, what="bot serve answering")
        streams: list[list[Frame]] = [[], []]
        async with (
            alice.stream("GET", "/sessions/s/events", headers=SSE) as log_stream,
            alice.stream(
                "POST", "/sessions/t/turns", json={"text": "hi", "turn_id": "t1"}, headers=SSE
            ) as turn_stream,
        ):
            assert log_stream.status_code == turn_stream.status_code == 200
            reading = [
                asyncio.create_task(_read_all(log_stream, streams[0])),
                asyncio.create_task(_read_all(turn_stream, streams[1])),
            ]
            waiting = asyncio.create_task(
                alice.post("/sessions/w/turns?wait=60", json={"text": "hi", "turn_id": "w1"})
            )

            async def all_open() -> bool:
                queued = (await alice.get("/sessions/w/turns/w1")).status_code == 200
                return queued and all(streams)  # each stream has had a heartbeat at least

            await eventually(all_open, within=30, what="the readers connected")
            sent = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(SHUTDOWN_GRACE_SECONDS * 3):
                await asyncio.gather(*reading)
                answered = await waiting
                code = await proc.wait()
            took = time.monotonic() - sent

    output = log.read_text()
    # uvicorn re-raises the signal it stopped on once it is done (one process: killed by it, as
    # a process without a handler would be); its supervisor of several exits 0.
    assert code in (0, -signal.SIGTERM), output
    assert took < SHUTDOWN_GRACE_SECONDS, f"took {took:.1f} s to exit:\n{output}"
    for seen in streams:
        said = [f for f in seen if f.event != COMMENT]
        assert said, "the stream ended without a frame"
        assert said[-1].event == "closing", [f.event for f in said]
        assert "reconnect" in said[-1].data["reason"]
    assert answered.status_code == 202
    assert answered.json()["status"] == "queued"
    assert answered.headers["location"] == "/sessions/w/turns/w1"
    assert "Traceback" not in output, output
    levels = {json.loads(line)["level"] for line in output.splitlines() if line.startswith("{")}
    assert levels <= {"debug", "info"}, output
