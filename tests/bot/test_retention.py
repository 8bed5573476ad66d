"""Retention seen from Slack: after the clock's prune, Slack retrying a message already answered
posts nothing, and the next message in the thread gets its reply once, below the first (the
renderer's cursor survives the prune, so nothing from before is shown again)."""

from __future__ import annotations

import asyncio
import time

from bot.core.clock import Clock
from bot.core.retention import Retention
from bot.slack.inbound import session_key
from storage.delivery.bodies import PostBody
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import eventually, idle, replies

CHANNEL = "C0KEEP"
DAY = 86400.0


async def test_after_the_clocks_prune_a_retry_posts_nothing_and_the_thread_goes_on(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = app.slack.new_ts()
    mention = app.slack.mention_event("U0ALICE", "hi", channel=CHANNEL, ts=ts)
    assert (await app.slack.post_event(mention)).status_code == 200
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    key = session_key("T0DEMO", CHANNEL, ts)
    bot = app.bot

    async def rendered() -> bool:
        target = await bot.delivery.get_target(key)
        return target is not None and not target.active

    await eventually(rendered)
    cursor = (await bot.delivery.get_target(key)).cursor
    clock = Clock(
        runtime=bot.runtime,
        agent=bot.agent,
        delivery=bot.delivery,
        renderers=bot.renderers,
        team="T0DEMO",
        now=lambda: time.time() + 31 * DAY,
        retention=Retention(older_than=30 * DAY),
    )
    report = await clock.prune()
    assert report is not None
    assert (report.counts.turns, report.counts.held) == (1, 0)
    assert report.counts.events == cursor  # everything the renderer had shown, nothing more
    assert report.reply_bodies == 1
    assert await bot.runtime.store.read_events(key) == []
    [post] = await bot.delivery.posts(key, kind="reply")
    assert (post.body, post.state) == (PostBody(), "closed")
    assert post.ts is not None  # kept: it says which message of the thread is this reply

    calls = len(standin.calls)
    assert (await app.slack.post_event(mention, retry_num=1)).status_code == 200
    await eventually(rendered)
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."]
    posted = [c for c in standin.calls[calls:] if c.method.startswith("chat.")]
    assert posted == []
    assert len(await bot.runtime.store.list_turns(key)) == 1

    await app.slack.mention("U0ALICE", "and again?", channel=CHANNEL, thread_ts=ts)
    await eventually(lambda: len(replies(standin, CHANNEL)) == 2)
    await eventually(lambda: idle(standin, CHANNEL))
    await eventually(rendered)
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."] * 2


async def test_bot_clock_prunes_when_it_starts_and_again_at_each_prune_time(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await app.slack.mention("U0ALICE", "hi", channel=CHANNEL)
    key = session_key("T0DEMO", CHANNEL, ts)
    await eventually(lambda: idle(standin, CHANNEL) and replies(standin, CHANNEL))
    store = app.bot.runtime.store
    await eventually(lambda: _finished(store, key))
    # A prune holds what the renderer has not shown yet: at load its cursor may still trail the
    # log when the reply already reads as done, and the start's prune would then keep the lot.
    await eventually(lambda: _shown(app.bot.delivery, store, key))
    now = [time.time() + 31 * DAY]
    clock = Clock(
        runtime=app.bot.runtime,
        agent=app.bot.agent,
        delivery=app.bot.delivery,
        renderers=app.bot.renderers,
        team="T0DEMO",
        now=lambda: now[0],
        expiry_interval=0.05,
        retention=Retention(older_than=30 * DAY, every=DAY),
    )
    stop = asyncio.Event()
    running = asyncio.create_task(clock.run(stop))
    try:
        await eventually(lambda: _events(store, key, 0))  # pruned at start
        # The next prune time is the next midnight (UTC) of the fake clock, not before.
        midnight = (now[0] // DAY + 1) * DAY
        await app.slack.mention("U0ALICE", "again", channel=CHANNEL, thread_ts=ts)
        await eventually(lambda: _events(store, key, 1, at_least=True))
        await eventually(lambda: idle(standin, CHANNEL) and _finished(store, key))
        await eventually(lambda: _shown(app.bot.delivery, store, key))
        now[0] = midnight - 1  # that turn is a month old by now, but the clock waits for midnight
        assert clock._prune_if_due(midnight) == midnight
        assert await store.read_events(key) != []
        now[0] = midnight + 1
        await eventually(lambda: _events(store, key, 0))
    finally:
        stop.set()
        await running


async def _finished(store, key) -> bool:
    turns = await store.list_turns(key)
    return bool(turns) and all(t.status.finished for t in turns)


async def _events(store, key, count: int, *, at_least: bool = False) -> bool:
    logged = len(await store.read_events(key))
    return logged >= count if at_least else logged == count


async def _shown(delivery, store, key) -> bool:
    """The renderer's cursor is at the log's last event (a prune would hold what is past it)."""
    target = await delivery.get_target(key)
    logged = await store.read_events(key)
    return target is not None and bool(logged) and target.cursor == logged[-1].seq
