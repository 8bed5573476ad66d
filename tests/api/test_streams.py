"""Event streams over HTTP: a turn's events as SSE while it runs, a reader that disconnects
mid-turn and reconnects with `Last-Event-ID` (nothing missed, nothing twice: compared with the
durable log), live deltas marked as such, heartbeats, and no subscription left behind by a
reader that went away."""

from __future__ import annotations

import asyncio

import pytest

from agent import ScriptedModel
from tests.api.agents import AGENT, PAY
from tests.api.sse_client import COMMENT, Frame, frames
from tests.bot.agents import GATE, GATED
from tests.bot.harness import ONE_PROCESS, eventually

pytestmark = pytest.mark.usefixtures("serving")
SSE = {"Accept": "text/event-stream"}


async def _read_until(response, stop, comments: bool = False) -> list[Frame]:
    seen: list[Frame] = []
    async with asyncio.timeout(30):
        async for item in frames(response, comments):
            seen.append(item)
            if stop(item):
                break
    return seen


async def test_a_turn_streams_its_events_then_its_result(db_url, api, clients, serving) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    async with alice.stream(
        "POST", "/sessions/s/turns", json={"text": "refund 42", "turn_id": "t1"}, headers=SSE
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        got = [f async for f in frames(response)]

    assert got[-1].event == "turn.result"
    assert got[-1].id is None
    assert got[-1].data["status"] == "suspended"
    assert got[-1].data["request"]["id"] == "approve"
    durable = [f for f in got if f.id is not None]
    log = (await alice.get("/sessions/s/events")).json()["events"]
    assert [f.id for f in durable] == [e["seq"] for e in log]
    assert [f.event for f in durable] == [e["type"] for e in log]
    assert durable[-1].event == "input.requested"
    assert all(f.data["live"] is False and f.data["seq"] == f.id for f in durable)
    live = [f for f in got if f.event == "message.delta"]
    assert all(f.id is None for f in live)
    assert all(f.data["live"] is True for f in live)
    if serving == ONE_PROCESS:
        # Listening from before the turn started: every delta, in its place.
        assert [f.data["text"] for f in live] == ["Checking ", "the refund."]
        place = [f.event for f in got].index("message.delta")
        assert got[place - 1].event == "turn.started"


async def test_a_reader_that_disconnects_mid_turn_misses_nothing_and_sees_nothing_twice(
    db_url, api, clients
) -> None:
    GATE.pop("slow", None)
    bot = await api(db_url, AGENT, ScriptedModel(GATED))
    alice = clients(bot, "alice")
    service = bot.bot.api
    in_tool: list[Frame] = []

    def waiting_with_a_heartbeat(item: Frame) -> bool:
        if item.event == "action.requested":
            in_tool.append(item)
        return bool(in_tool) and item.event == COMMENT

    async with alice.stream(
        "POST", "/sessions/s/turns", json={"text": "go", "turn_id": "t1"}, headers=SSE
    ) as response:
        # The turn waits in its tool: the stream idles, with heartbeats; then the reader goes.
        first = await _read_until(response, waiting_with_a_heartbeat, comments=True)
    assert first[-1].data == {"comment": "ping"}
    # The reader went away: its stream and subscription are gone.
    await eventually(lambda: service.streams == 0, within=15)

    GATE.setdefault("slow", asyncio.Event()).set()
    last = max(f.id for f in first if f.id is not None)
    async with alice.stream(
        "GET", "/sessions/s/events", headers={**SSE, "Last-Event-ID": str(last)}
    ) as response:
        second = await _read_until(response, lambda f: f.event == "turn.completed")

    log = (await alice.get("/sessions/s/events")).json()["events"]
    ids = [f.id for f in first + second if f.id is not None]
    assert ids == [e["seq"] for e in log], "every durable event once, in order"
    assert second[-1].event == "turn.completed"
    await eventually(lambda: service.streams == 0, within=15)


async def test_a_reconnect_with_after_on_the_json_log_and_the_stream_agree(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    await alice.post("/sessions/s/turns", json={"text": "refund 42", "turn_id": "t1"})
    log = (await alice.get("/sessions/s/events")).json()["events"]
    middle = log[len(log) // 2]["seq"]
    async with alice.stream("GET", f"/sessions/s/events?after={middle}", headers=SSE) as response:
        got = await _read_until(response, lambda f: f.id == log[-1]["seq"])
    assert [f.id for f in got] == [e["seq"] for e in log if e["seq"] > middle]
    # An idempotent re-POST as a stream, from where the reader was, replays the rest.
    async with alice.stream(
        "POST",
        "/sessions/s/turns",
        json={"text": "refund 42", "turn_id": "t1"},
        headers={**SSE, "Last-Event-ID": str(middle)},
    ) as response:
        replayed = [f async for f in frames(response)]
    assert [f.id for f in replayed if f.id] == [e["seq"] for e in log if e["seq"] > middle]
    assert replayed[-1].event == "turn.result"


async def test_a_stream_sees_a_resumed_turn_live(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    parked = (
        await alice.post("/sessions/s/turns", json={"text": "refund", "turn_id": "t1"})
    ).json()
    cursor = (await alice.get("/sessions/s/events")).json()["last_seq"]

    async def answer() -> None:
        body = {
            "turn_id": "t1",
            "input_id": "approve",
            "digest": parked["request"]["digest"],
            "value": True,
        }
        assert (await alice.post("/sessions/s/resume", json=body)).status_code == 202

    async with alice.stream("GET", f"/sessions/s/events?after={cursor}", headers=SSE) as response:
        answering = asyncio.create_task(answer())
        got = await _read_until(response, lambda f: f.event == "turn.completed")
        await answering
    assert next(f.event for f in got if f.id) == "input.resolved"
    assert got[-1].data["text"] == "Refund settled."
    assert all(f.id > cursor for f in got if f.id)


async def test_a_client_subscribes_before_the_sessions_first_turn(db_url, api, clients) -> None:
    """The events of a session that has had no turn yet: an empty log (JSON), or a stream
    that delivers the first turn's events as they come, so nothing is missed in between."""
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    assert (await alice.get("/sessions/new/events")).json() == {"events": [], "last_seq": 0}
    async with alice.stream("GET", "/sessions/new/events", headers=SSE) as response:
        assert response.status_code == 200
        lines = response.aiter_lines()
        assert (await anext(lines)).startswith("retry:")  # subscribed from here on
        started = asyncio.create_task(
            alice.post("/sessions/new/turns", json={"text": "refund", "turn_id": "t1"})
        )
        got = await _read_until(lines, lambda f: f.event == "input.requested")
        assert (await started).json()["status"] == "suspended"
    log = (await alice.get("/sessions/new/events")).json()["events"]
    assert [f.id for f in got if f.id is not None] == [e["seq"] for e in log]
    assert got[0].event == "turn.started"
