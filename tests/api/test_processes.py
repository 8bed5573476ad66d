"""The API in production's shape: a web process that runs no turns (`RUN_TURNS=false`) and a
`bot worker`, two real processes sharing only the database (and, where set, Redis). A reader
of the web process follows a turn the worker runs, disconnects mid-turn, reconnects with
`Last-Event-ID`, and gets every durable event exactly once; with Redis the worker's live
deltas reach it too."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.conftest import BY_USER, TOKENS, client
from tests.api.sse_client import Frame, frames
from tests.support import children

SSE = {"Accept": "text/event-stream"}


@contextlib.asynccontextmanager
async def _child(
    role: str, db_url: str, api_url: str, gate: Path, env: dict[str, str]
) -> AsyncIterator[int]:
    proc = await children.start(
        "tests.api.api_child", db_url, api_url, str(gate), "--role", role, env=env, stderr=None
    )
    try:
        line = await children.wait_line(proc, "PORT ", within=60)
        yield int(line.split()[1])
    finally:
        await children.stop(proc)


async def _until(source, stop) -> list[Frame]:
    seen: list[Frame] = []
    async with asyncio.timeout(60):
        async for item in frames(source):
            seen.append(item)
            if stop(item):
                return seen
    raise AssertionError(f"the stream ended early: {[f.event for f in seen]}")


async def _follow_a_turn_across_a_reconnect(
    db_url: str, api_url: str, gate: Path, env: dict[str, str]
) -> list[Frame]:
    settings = {
        "API_TOKENS": json.dumps(TOKENS),
        "API_POLL_SECONDS": "0.1",
        "API_HEARTBEAT_SECONDS": "0.5",
        **env,
    }
    async with (
        _child("worker", db_url, api_url, gate, settings),
        _child("web", db_url, api_url, gate, settings) as port,
        client(
            f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {BY_USER['alice']}"},
            timeout=30,
        ) as alice,
    ):
        async with alice.stream(
            "POST", "/sessions/p/turns", json={"text": "go", "turn_id": "t1"}, headers=SSE
        ) as response:
            assert response.status_code == 200
            first = await _until(response, lambda f: f.event == "action.requested")
        last = max(f.id for f in first if f.id is not None)
        async with alice.stream(
            "GET", "/sessions/p/events", headers={**SSE, "Last-Event-ID": str(last)}
        ) as response:
            lines = response.aiter_lines()
            assert (await anext(lines)).startswith("retry:")  # the reader listens from here
            await asyncio.to_thread((gate / "open").touch)
            second = await _until(lines, lambda f: f.event == "turn.completed")
        log = (await alice.get("/sessions/p/events")).json()["events"]
        ids = [f.id for f in first + second if f.id is not None]
        assert ids == [e["seq"] for e in log], "every durable event once, in order"
        assert second[-1].data["text"] == "Done after the gate."
        return first + second


async def test_a_reader_of_the_web_process_follows_the_workers_turn(
    db_url, standin, tmp_path: Path
) -> None:
    await _follow_a_turn_across_a_reconnect(db_url, standin.api_url, tmp_path, {})


@pytest.mark.redis
@pytest.mark.parametrize("picked_db_url", ["postgres"], indirect=True)
async def test_with_redis_the_workers_live_deltas_reach_the_web_reader(
    db_url, standin, tmp_path: Path, redis_url: str, redis_prefix: str
) -> None:
    got = await _follow_a_turn_across_a_reconnect(
        db_url, standin.api_url, tmp_path, {"REDIS_URL": redis_url, "REDIS_PREFIX": redis_prefix}
    )
    deltas = [f for f in got if f.event == "message.delta"]
    assert deltas, "the worker's deltas travel over Redis to the web process's reader"
    assert all(f.id is None and f.data["live"] is True for f in deltas)
    # Each is a chunk the model typed; one that arrived after its step's commit had been read
    # from the log is dropped (live only), so which ones arrive depends on timing.
    assert {f.data["text"] for f in deltas} <= {
        "Working ",
        "on it.",
        "Done ",
        "after ",
        "the gate.",
    }
