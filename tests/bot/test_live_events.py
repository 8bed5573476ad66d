"""Live replies when the turn and its renderer are in different worker processes (web + two
workers, `REDIS_URL` set): the deltas travel over Redis, so the reply still streams word by word.

Which worker renders a thread is decided by its delivery lease (whichever render sweep takes it
first) and which one runs the turn by the turn's lease, so with two workers both cases happen.
Here it is made certain: one worker runs turns and renders nothing (`RendererPool.enabled`
off), the other renders and runs no turn (`Runtime.run_turns` off). Each bot has its own engine,
connections and hub, as separate processes have; nothing passes between them but the database
and Redis.

The model types one word at a time and waits (up to 5 s) until Slack shows it before the next:
a word that reaches Slack only when the step commits is recorded as late. So "streamed before
the commit" is decided by the order of events, not by timing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest

from agent import MessageDelta, ScriptedReply
from agent.models import opening_text
from agent.seams import ModelEvent, ModelRequest, TextDelta, ThinkingDelta
from bot.app import SlackBot, open_bot
from bot.core.asgi_server import BackgroundServer
from bot.slack.inbound import session_key
from bot.slack.rendering.progress import progress_line
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message, is_request
from tests.bot.agents import AGENT
from tests.bot.harness import (
    FAST,
    RUNTIME_OPTIONS,
    SECRET,
    eventually,
    idle,
    rendered_out,
    settings_for,
)
from tests.support.tcp_proxy import TcpProxy

pytestmark = [
    pytest.mark.redis,
    pytest.mark.parametrize("picked_db_url", ["postgres"], indirect=True),
]

CHANNEL = "C0LIVE"
RELAY_LOG = "storage.redis.events"
SHOW_WITHIN = 5.0


@dataclass
class Script:
    words: list[str]
    cut_before: int | None = None
    """Index of the word before which `cut` is called (Redis goes away mid-step)."""
    cut: Callable[[], None] = lambda: None
    go: asyncio.Event = field(default_factory=asyncio.Event)
    hold_before: int | None = None
    """Index of the word before which the model waits for `release` (after setting `held`)."""
    held: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    late: list[str] = field(default_factory=list)
    """Words that did not show in Slack before the model went on (so: not before the commit)."""

    @property
    def text(self) -> str:
        return "".join(self.words)


class TypingModel:
    """Per opening text, a script: once `go` is set, yields its words one at a time, each after
    the previous one shows in the thread (words after a cut are not waited for)."""

    def __init__(self, standin: SlackStandIn, scripts: dict[str, Script]) -> None:
        self.standin = standin
        self.scripts = scripts

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        script = self.scripts[opening_text(request.messages)]
        async with asyncio.timeout(30):
            await script.go.wait()
        typed = ""
        for index, word in enumerate(script.words):
            if index == script.cut_before:
                script.cut()
            if index == script.hold_before:
                script.held.set()
                async with asyncio.timeout(30):
                    await script.release.wait()
            yield TextDelta(text=word)
            typed += word
            waits = script.cut_before is None or index < script.cut_before
            if waits and not await self._shows(typed.strip()):
                script.late.append(word)
        yield ScriptedReply(text=script.text).reply()

    async def _shows(self, text: str) -> bool:
        try:
            await eventually(
                lambda: any(text in m.text for m in reply_messages(self.standin)),
                within=SHOW_WITHIN,
            )
        except TimeoutError:
            return False
        return True


class ThinkingModel:
    """Once `go` is set, thinks its script's words one at a time (the progress a newer model
    shows between tool calls), each after the step's running card shows it, then says "Done."."""

    def __init__(self, standin: SlackStandIn, script: Script) -> None:
        self.standin = standin
        self.script = script

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async with asyncio.timeout(30):
            await self.script.go.wait()
        thought = ""
        for word in self.script.words:
            yield ThinkingDelta(text=word)
            thought += word
            if not await self._shows(progress_line(thought)):
                self.script.late.append(word)
        yield ScriptedReply(text="Done.").reply()

    async def _shows(self, line: str | None) -> bool:
        def running() -> bool:
            return any(
                m.tasks.get("progress:1", {}).get("details") == line
                for m in reply_messages(self.standin)
            )

        try:
            await eventually(running, within=SHOW_WITHIN)
        except TimeoutError:
            return False
        return True


def reply_messages(standin: SlackStandIn, thread_ts: str | None = None) -> list[Message]:
    return [
        m
        for m in standin.bot_messages(CHANNEL)
        if not is_request(m) and (thread_ts is None or m.thread_ts == thread_ts)
    ]


def text_chunks(standin: SlackStandIn, ts: str) -> list[str]:
    """The markdown text of every stream call that made message `ts`, in order."""
    chunks: list[str] = []
    for call in standin.calls:
        if call.method not in ("chat.startStream", "chat.appendStream", "chat.stopStream"):
            continue
        if call.response.get("ts") != ts:
            continue
        for chunk in call.args.get("chunks") or []:
            if chunk.get("type") == "markdown_text" and chunk.get("text"):
                chunks.append(str(chunk["text"]))
    return chunks


@dataclass
class Split:
    """A web process, a worker that only runs turns and a worker that only renders."""

    web: SlackBot
    server: BackgroundServer
    slack: SlackDriver
    turns: SlackBot
    render: SlackBot

    async def stop(self) -> None:
        await self.slack.aclose()
        await self.server.stop()
        await self.turns.close()
        await self.render.close()


@pytest.fixture
async def open_split(
    standin: SlackStandIn, redis_prefix: str
) -> AsyncIterator[Callable[[str, Any, str], Awaitable[Split]]]:
    """Opens the three bots on one database and one Redis (under this test's prefix)."""
    opened: list[Split] = []

    async def open_split(db_url: str, model: Any, redis_url: str) -> Split:
        extra = {"REDIS_URL": redis_url, "REDIS_PREFIX": redis_prefix}

        async def bot(run_turns: bool, worker: bool) -> SlackBot:
            return await open_bot(
                settings_for(db_url, standin, RUN_TURNS=run_turns, **extra),
                agent=AGENT,
                model=model,
                runtime_options=dict(RUNTIME_OPTIONS),
                render_settings=FAST,
                worker=worker,
            )

        turns = await bot(True, True)
        turns.renderers.enabled = False  # runs turns, renders nothing
        render = await bot(True, True)
        render.runtime.run_turns = False  # renders, runs no turn
        await turns.start()
        await render.start()
        web = await bot(False, False)
        server = await BackgroundServer(web.http_app()).start()
        slack = SlackDriver(server.url, SECRET, standin=standin)
        running = Split(web, server, slack, turns, render)
        opened.append(running)
        return running

    try:
        yield open_split
    finally:
        for running in opened:
            await running.stop()


async def mention_and_go(app: Split, text: str, script: Script) -> str:
    """Mention the bot; once the rendering worker hears the thread's live events, let the model
    type. Returns the thread's ts."""
    ts = await app.slack.mention("U0ALICE", text, channel=CHANNEL)
    relay = app.render._relay
    assert relay is not None
    async with asyncio.timeout(15):
        await relay.wait_watching(session_key("T0DEMO", CHANNEL, ts))
    script.go.set()
    return ts


async def finished_reply(standin: SlackStandIn, ts: str, text: str) -> Message:
    await eventually(
        lambda: any(text in m.text for m in reply_messages(standin, ts)) and idle(standin, CHANNEL),
        within=30,
    )
    [reply] = reply_messages(standin, ts)
    return reply


# -- tests ------------------------------------------------------------------------------------


async def test_a_reply_streams_word_by_word_from_a_turn_in_another_worker(
    db_url: str, redis_url: str, standin: SlackStandIn, open_split: Any
) -> None:
    script = Script(["Alpha ", "beta ", "gamma ", "delta."])
    app = await open_split(db_url, TypingModel(standin, {"count": script}), redis_url)
    ts = await mention_and_go(app, "count", script)
    reply = await finished_reply(standin, ts, script.text)

    assert script.late == [], "these words reached Slack only when the step committed"
    chunks = text_chunks(standin, reply.ts)
    assert chunks == script.words, "one chunk per word, each before the commit"
    assert reply.text == script.text, "the text once: the durable message added nothing"
    turns = await app.web.runtime.store.list_turns(session_key("T0DEMO", CHANNEL, ts))
    assert [t.status.value for t in turns] == ["completed"]


async def test_progress_shows_live_from_a_turn_in_another_worker(
    db_url: str, redis_url: str, standin: SlackStandIn, open_split: Any
) -> None:
    """`progress.updated` crosses Redis too: each newer state shows while the step runs, and
    the settled card, never the reply's words, is what remains."""
    script = Script(["Checking ", "the ", "carrier."])
    app = await open_split(db_url, ThinkingModel(standin, script), redis_url)
    ts = await mention_and_go(app, "where is it?", script)
    reply = await finished_reply(standin, ts, "Done.")

    assert script.late == [], "this progress reached Slack only when the step committed"
    assert reply.tasks["progress:1"]["status"] == "complete"
    assert reply.tasks["progress:1"]["details"] == "Checking the carrier."
    assert reply.text == "Done."


async def test_a_delta_lost_on_the_way_never_shows_text_twice(
    db_url: str, redis_url: str, standin: SlackStandIn, open_split: Any
) -> None:
    """Pub/sub is at-most-once. After a lost delta the renderer must not show the rest of the
    step out of place: it waits for the step's commit, then shows the text once."""
    script = Script(["Alpha ", "beta ", "gamma ", "delta."], cut_before=1)
    app = await open_split(db_url, TypingModel(standin, {"count": script}), redis_url)
    relay = app.turns._relay
    assert relay is not None
    send = relay._send
    lost: list[bytes] = []

    async def lossy(batch: list[tuple[bytes, bytes]]) -> None:
        """Redis loses the message carrying "beta " (published, never delivered)."""
        lost.extend(data for _, data in batch if b'"text":"beta "' in data)
        await send([(channel, data) for channel, data in batch if data not in lost])

    relay._send = lossy  # type: ignore[method-assign]
    ts = await mention_and_go(app, "count", script)
    reply = await finished_reply(standin, ts, script.text)

    assert len(lost) == 1
    assert script.late == [], "the word before the loss streamed"
    assert reply.text == script.text, "shown once, in order"
    assert text_chunks(standin, reply.ts)[0] == "Alpha "


async def test_redis_going_away_mid_turn_loses_nothing_and_relaying_resumes(
    db_url: str,
    redis_url: str,
    standin: SlackStandIn,
    open_split: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    target = urlsplit(redis_url)
    proxy = await TcpProxy.start(target.hostname or "127.0.0.1", target.port or 6379)
    try:
        first = Script(["One ", "two ", "three ", "four."], cut_before=1, cut=proxy.cut)
        second = Script(["Five ", "six ", "seven."])
        model = TypingModel(standin, {"first": first, "second": second})
        via_proxy = target._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
        app = await open_split(db_url, model, via_proxy)

        ts1 = await mention_and_go(app, "first", first)
        reply1 = await finished_reply(standin, ts1, first.text)
        assert not proxy.up
        turns = await app.web.runtime.store.list_turns(session_key("T0DEMO", CHANNEL, ts1))
        assert [t.status.value for t in turns] == ["completed"]

        def relay_warnings() -> list[str]:
            return [
                r.getMessage()
                for r in caplog.records
                if r.name == RELAY_LOG and r.levelno == logging.WARNING
            ]

        # Redis stays away until both relays have met the outage: the client retries once
        # after a short back-off, so one that first used its connection after a restore (a
        # starved send task, say) would not meet it at all.
        await eventually(lambda: len(relay_warnings()) >= 2, what="both relays noticed the outage")
        await proxy.restore()
        ts2 = await mention_and_go(app, "second", second)
        reply2 = await finished_reply(standin, ts2, second.text)
    finally:
        await proxy.close()

    assert first.late == [], "the word before the outage streamed"
    assert reply1.text == first.text, "complete and once, from the durable log"
    assert second.late == [], "relaying resumed once Redis was back"
    assert reply2.text == second.text
    assert text_chunks(standin, reply2.ts) == second.words
    mine = [r for r in caplog.records if r.name == RELAY_LOG]
    warnings = [r.getMessage() for r in mine if r.levelno == logging.WARNING]
    publishing = [w for w in warnings if "publishing" in w]
    assert len(publishing) == 1, warnings  # the worker running the turn: one line
    assert len(warnings) == 2, warnings  # and the rendering worker, which was listening
    assert all(r.exc_info is None for r in mine if r.levelno >= logging.WARNING)
    assert any("reachable again" in r.getMessage() for r in mine)


async def test_a_delta_that_arrives_after_its_turn_was_shown_is_dropped(
    db_url: str, redis_url: str, standin: SlackStandIn, open_split: Any
) -> None:
    """Pub/sub orders messages per publisher only: a delta of a finished turn, sent by the
    worker that ran it, can reach the renderer after the next turn's events (sent by another
    worker). Its place is its own `after`, long passed: it must not open a new reply for the old
    turn (found by the many-workers chaos test: "Hold placed." posted twice)."""
    first = Script(["One ", "two."])
    second = Script(["Three ", "four."], hold_before=1)
    app = await open_split(
        db_url, TypingModel(standin, {"first": first, "second": second}), redis_url
    )
    ts = await mention_and_go(app, "first", first)
    await finished_reply(standin, ts, first.text)
    key = session_key("T0DEMO", CHANNEL, ts)
    store = app.web.runtime.store
    [done] = await store.list_turns(key)
    events = await store.read_events(key, 0, 100)
    started_seq = next(e.seq for e in events if e.type == "turn.started")

    await app.slack.reply("U0ALICE", "second", channel=CHANNEL, thread_ts=ts)
    relay = app.render._relay
    assert relay is not None
    async with asyncio.timeout(15):
        await relay.wait_watching(key)
    second.go.set()
    async with asyncio.timeout(30):
        await second.held.wait()  # "Three " shows: the renderer is in the second turn's step
    late = MessageDelta(session=key, turn_id=done.turn_id, text="Stale words.", after=started_seq)
    app.render.runtime.hub.deliver(late)
    # The window in which a reply opened by the stale delta would be posted (flushes every
    # 0.1 s); the next word would otherwise close it unposted.
    await asyncio.sleep(1.0)
    second.release.set()
    await eventually(
        lambda: (
            any(second.text in m.text for m in reply_messages(standin, ts))
            and idle(standin, CHANNEL)
        ),
        within=30,
    )
    await rendered_out(db_url)  # a reply the stale delta opened would be posted by now

    said = [m.text for m in reply_messages(standin, ts)]
    assert said == [first.text, second.text]
    assert not any("Stale" in m.text for m in standin.bot_messages(CHANNEL))
    assert second.late == []
