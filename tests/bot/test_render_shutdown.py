"""A shutdown ends within its grace period whatever the renderers were doing: waiting out a rate
limit, between tries after a Slack error, or handed a live event at the very moment they were
cancelled (on Python 3.11 an `asyncio.wait_for` whose inner wait completes in that same moment
swallows the cancellation; a renderer that went on then kept the shutdown waiting for a turn
that could not end before it)."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent import MessageDelta
from bot.slack.inbound import session_key
from bot.slack.rendering import RenderSettings
from tests.bot.agents import AGENT, GATE, LONG, SIMPLE, model
from tests.bot.harness import eventually, replies

CHANNEL = "C0SHUT"
WITHIN = 20.0
"""Far under what the renderers wait for (a minute's rate limit, a turn that never ends), far
over the grace period (2 s): a shutdown that waits on them fails this, a busy machine does not."""


async def test_a_renderer_handed_an_event_as_it_is_cancelled_does_not_hold_the_shutdown(
    db_url, launch, standin
):
    GATE.clear()
    # Polling seldom: between events the renderer waits for the next one, as it mostly does.
    render = RenderSettings(flush_interval=0.1, poll_interval=60, lease_ttl=120)
    app = await launch(db_url, AGENT, model(LONG), render=render)
    ts = await app.slack.mention("U0ALICE", "do the long thing", channel=CHANNEL)
    await eventually(lambda: "long" in GATE)
    await eventually(lambda: any("First part" in m.text for m in replies(standin, CHANNEL)))
    await quiet(standin)  # the renderer has sent what it had: it waits for the next event
    key = session_key("T0DEMO", CHANNEL, ts)
    [turn] = await app.turns(key)
    pool = app.bot.renderers
    assert pool.running == 1  # rendering the turn, which waits in its long call

    # A live event reaches the renderer (as a relay hands it over: no await in between) and
    # the shutdown cancels it in the same moment.
    app.bot.runtime.hub.deliver(MessageDelta(session=key, turn_id=turn.turn_id, text=" more"))
    began = time.monotonic()
    async with asyncio.timeout(WITHIN):
        await pool.close()
    assert pool.running == 0
    assert time.monotonic() - began < WITHIN


async def quiet(standin, *, settle: float = 0.5) -> None:
    """Until the bot has made no Slack call for `settle` seconds."""
    seen = -1
    while len(standin.calls) != seen:
        seen = len(standin.calls)
        await asyncio.sleep(settle)


@pytest.mark.parametrize("waiting", ["a rate limit", "a Slack error"])
async def test_a_shutdown_ends_while_a_renderer_waits_to_try_again(
    db_url, launch, standin, waiting
):
    """The thread's first call is refused (a minute's `Retry-After`, or an error that makes
    the session wait before the next try); the bot is stopped meanwhile: it stops within the
    grace period, and makes no Slack call after."""
    render = RenderSettings(
        flush_interval=0.1, poll_interval=0.1, lease_ttl=2.0, backoff_base=60, backoff_cap=60
    )
    if waiting == "a rate limit":
        standin.fail("chat.startStream", "ratelimited", retry_after=60)
        tried = "chat.startStream"
    else:
        standin.fail("chat.startStream", "server_error")
        standin.fail("conversations.replies", "error:internal_error", times=100)
        tried = "conversations.replies"
    app = await launch(db_url, AGENT, model(SIMPLE), render=render)
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: standin.calls_to(tried), within=30)
    await quiet(standin)  # it heard back and waits to try again

    began = time.monotonic()
    async with asyncio.timeout(WITHIN):
        await app.stop()
    assert time.monotonic() - began < WITHIN
    calls = len(standin.calls)
    await asyncio.sleep(0.5)
    assert len(standin.calls) == calls
