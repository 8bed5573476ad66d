"""The ack path under load: bounded database work per process, the turn and its delivery target
committed together (and a renderer that finds them late or mid-turn still shows the reply), the
registration's semantics on its prebuilt statement, and `bot serve` as several processes on one
port."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.cli.main import main
from bot.slack.inbound import session_key
from bot.slack.listeners import ACKS_IN_FLIGHT
from bot.testing import SlackDriver
from bot.testing.http import local_client
from storage import SqlStore
from storage.delivery.store import DeliveryStore
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import SECRET, TOKEN, eventually, idle, replies
from tests.support import children

CHANNEL = "C0ACK"


async def test_a_burst_is_queued_a_few_at_a_time_and_each_event_is_one_turn(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE), RUN_TURNS=False)
    store = app.bot.runtime.store
    enqueue = store.enqueue_turn
    running, most = 0, 0

    async def slow_enqueue(*args: Any, **kwargs: Any) -> Any:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await asyncio.sleep(0.05)  # a slow database: the burst piles up behind it
            return await enqueue(*args, **kwargs)
        finally:
            running -= 1

    store.enqueue_turn = slow_enqueue
    stamps = [app.slack.new_ts() for _ in range(3 * ACKS_IN_FLIGHT)]
    events = [app.slack.mention_event("U0ALICE", "hi", channel=CHANNEL, ts=ts) for ts in stamps]
    responses = await asyncio.gather(*(app.slack.post_event(event) for event in events))

    assert [r.status_code for r in responses] == [200] * len(events)
    assert 1 < most <= ACKS_IN_FLIGHT
    for ts in stamps:
        turns = await app.turns(session_key("T0DEMO", CHANNEL, ts))
        expected = [(f"T0DEMO:{CHANNEL}:{ts}", "queued")]
        assert [(t.turn_id, t.status.value) for t in turns] == expected


async def test_a_turn_queued_slowly_is_still_rendered(db_url, launch, standin):
    """The renderer that starts with the event must find the turn already queued: finding the
    session registered but no turn, it went idle for good and the reply was never shown."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    store = app.bot.runtime.store
    enqueue = store.enqueue_turn

    async def late_enqueue(*args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0.5)  # a busy web process or database: the commit lands late
        return await enqueue(*args, **kwargs)

    store.enqueue_turn = late_enqueue
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), within=10)
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."]


async def _ended(turns: Awaitable[list[Any]]) -> bool:
    return any(t.status.finished for t in await turns)


async def test_a_turn_that_ends_while_the_renderer_looks_is_still_rendered(db_url, launch, standin):
    """The renderer reads whether any turn is left before it reads the events: the other way
    round, a turn run whole between the two reads left the session idle, its reply unshown.

    Made to happen every time: the renderer hears no live events (as when another process runs
    the turn), the turn starts only once the renderer asks whether any turn is left, and the
    answer comes once the turn has ended. (Checked: with the reads swapped, this fails.)"""
    app = await launch(db_url, AGENT, model(SIMPLE))
    store = app.bot.runtime.store
    commit, list_turns = store.commit, store.list_turns
    asking = asyncio.Event()

    async def commit_once_asked(*args: Any) -> Any:
        await asking.wait()  # the turn's first commit: the renderer's first look found nothing
        return await commit(*args)

    async def list_turns_once_ended(key: str) -> Any:
        asking.set()
        await eventually(lambda: _ended(list_turns(key)), within=10, what="the turn ended")
        return await list_turns(key)

    store.commit = commit_once_asked
    store.list_turns = list_turns_once_ended
    app.bot.renderers.runtime.hub.subscribe = lambda *_, **__: lambda: None  # type: ignore[method-assign]
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), within=10)
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."]


async def test_the_turn_and_where_its_replies_go_commit_together(db_url, launch, standin):
    """One transaction: a registration that fails leaves no turn behind (the ack is an error, so
    Slack sends the event again), and the retry queues, registers and renders it once."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    delivery = app.bot.delivery
    assert delivery.same_database
    registration = delivery.registration

    def failing(*args: Any, **kwargs: Any) -> Any:
        def write(handle: Any) -> None:
            registration(*args, **kwargs)(handle)  # written, then the transaction fails
            raise OSError("the database went away")

        return write

    delivery.registration = failing  # type: ignore[method-assign]
    ts = app.slack.new_ts()
    event = app.slack.mention_event("U0ALICE", "hello", channel=CHANNEL, ts=ts)
    first = await app.slack.post_event(event)
    assert first.status_code >= 500
    key = session_key("T0DEMO", CHANNEL, ts)
    assert await app.turns(key) == []
    assert await delivery.get_target(key) is None

    delivery.registration = registration  # type: ignore[method-assign]
    retry = await app.slack.post_event(event, retry_num=1)
    assert retry.status_code == 200
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL), within=10)
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."]
    assert [t.status.value for t in await app.turns(key)] == ["completed"]


async def test_registration_keeps_the_known_user_and_counts_every_registration(db_url):
    store = await SqlStore.open(db_url)
    try:
        delivery = await DeliveryStore.open(db_url, store=store)
        key = session_key("T0DEMO", CHANNEL, "1700000000.000100")
        for user in ("U0ALICE", None):
            await delivery.register(
                key,
                team="T0DEMO",
                channel=CHANNEL,
                thread_ts="1700000000.000100",
                user_id=user,
                now=time.time(),
            )
        target = await delivery.get_target(key)
        assert target is not None
        assert (target.user_id, target.active, target.activity) == ("U0ALICE", True, 2)
        assert not await delivery.go_idle(key, activity=1)  # registered again since then
        assert await delivery.go_idle(key, activity=2)
        assert await delivery.active_sessions() == []
        await delivery.close()
        # Closing it leaves the store (whose connection it shares on SQLite) working.
        assert await store.get_session(key) is None
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def serving(env: dict[str, str], log: Path) -> AsyncIterator[children.Process]:
    """`bot serve` in a process group of its own: with `WEB_CONCURRENCY` it forks web processes,
    and a test that fails must not leave them running, so the whole group is killed after."""
    with log.open("wb") as out:
        proc = await children.start(
            "bot.cli.main", "serve", env=env, stdout=out, stderr=out, group=True
        )
    try:
        yield proc
    finally:
        await children.kill_group(proc)


async def test_bot_serve_runs_web_concurrency_processes_on_one_port(db_url, standin, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": standin.api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-unused",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "RUN_TURNS": "false",
    }
    log = tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    async with serving(env, log) as proc:
        owners: set[str] = set()

        async def both_answer() -> bool:
            if proc.returncode is not None:
                pytest.fail(f"bot serve exited {proc.returncode}:\n{log.read_text()}")
            # A fresh connection each time: either process may accept it.
            async with local_client() as http:
                with contextlib.suppress(httpx.TransportError):
                    owners.add((await http.get(f"{base}/healthz")).json()["owner"])
            return len(owners) == 2

        try:
            await eventually(both_answer, within=60, what="two web processes")
        except TimeoutError:
            pytest.fail(f"answered only by {sorted(owners)} in 60 s; the log:\n{log.read_text()}")
        async with SlackDriver(base, SECRET, standin=standin) as slack:
            ts = await slack.mention("U0ALICE", "hello", channel=CHANNEL)
        store = await SqlStore.open(db_url)
        try:
            turns = await store.list_turns(session_key("T0DEMO", CHANNEL, ts))
        finally:
            await store.close()
        assert [t.status.value for t in turns] == ["queued"]

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0, log.read_text()


def test_bot_serve_refuses_a_database_without_the_schema(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # no .env here
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-unused")
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        assert main(["serve"]) == 2
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert "bot db upgrade" in capsys.readouterr().err
