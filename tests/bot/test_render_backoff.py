"""A Slack error is not retried without end: a session whose rendering failed waits longer after
each failure in a row (however many workers could take it up), the error is logged once, and a
thread Slack cannot reach is not asked for again until something new happens in it, while its
turn goes on to the end."""

from __future__ import annotations

import asyncio
import itertools
import logging

from agent import TurnStatus
from bot.slack.clients import UNINSTALLED
from bot.slack.inbound import session_key
from bot.slack.rendering import RenderSettings
from tests.bot.agents import AGENT, GATE, LONG, SIMPLE, model
from tests.bot.harness import eventually

CHANNEL = "C0BACK"
POOL_LOG = "bot.slack.rendering.pool"


def reads(standin):
    return [c for c in standin.calls_to("conversations.replies")]


async def test_a_thread_slack_cannot_find_is_not_asked_for_again_and_again(
    db_url, launch, standin, caplog
):
    """The stream's start got no answer, so the renderer looks for it in the thread, and Slack
    says the thread is gone: it stops there (once, said once in the log), the session goes
    idle, and the turn completes regardless."""
    caplog.set_level(logging.DEBUG, logger=POOL_LOG)
    standin.fail("chat.startStream", "server_error")
    standin.fail("conversations.replies", "error:thread_not_found", times=1000)
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    key = session_key("T0DEMO", CHANNEL, ts)

    await eventually(lambda: reads(standin), within=30)

    async def completed() -> bool:
        turns = await app.turns(key)
        return bool(turns) and turns[0].status == TurnStatus.COMPLETED

    await eventually(completed, within=30, what="the turn went on")
    await eventually(lambda: _idle(app, key), within=30, what="the session went idle")
    # Three sweeps' worth of time: the old renderer asked again at every sweep (2 s).
    await asyncio.sleep(6)
    assert len(reads(standin)) == 1, [c.at for c in reads(standin)]
    said = [r for r in caplog.records if r.name == POOL_LOG and r.levelno >= logging.WARNING]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert getattr(said[0], "code", None) == "thread_not_found"


async def _idle(app, key) -> bool:
    return key not in await app.bot.delivery.active_sessions()


BASE = 0.5


async def test_each_failure_in_a_row_waits_longer_whichever_worker_takes_it_up(
    db_url, launch, standin, caplog
):
    """Two processes render from one database; the thread's reads fail five times over. Each
    try comes at least twice as late as the one before (the failing process keeps the
    session's lease through the wait, so the other does not step in), the error is logged
    once, and the reply is shown once Slack answers again."""
    caplog.set_level(logging.DEBUG, logger=POOL_LOG)
    render = RenderSettings(
        flush_interval=0.1, poll_interval=0.1, lease_ttl=2.0, backoff_base=BASE, backoff_cap=60
    )
    standin.fail("chat.startStream", "server_error")
    standin.fail("conversations.replies", "error:internal_error", times=5)
    app = await launch(db_url, AGENT, model(SIMPLE), render=render)
    await launch(db_url, AGENT, model(SIMPLE), render=render)  # a second worker
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)

    await eventually(lambda: len(reads(standin)) >= 6, within=60, what="tries until Slack answers")
    at = [c.at for c in reads(standin)[:6]]
    gaps = [later - earlier for earlier, later in itertools.pairwise(at)]
    for n, gap in enumerate(gaps):
        assert gap >= BASE * 2**n * 0.9, gaps  # only lower bounds: a busy machine is slower
    warned = [
        r
        for r in caplog.records
        if r.name == POOL_LOG and r.levelno >= logging.WARNING and "Slack error" in r.getMessage()
    ]
    assert len(warned) == 1, [r.getMessage() for r in warned]


async def test_a_token_slack_refuses_stops_the_turns_and_nothing_more_is_sent(
    db_url, launch, standin
):
    """Slack refuses the token mid-turn (a process that never heard of the uninstall): the
    renderer neither retries nor posts the reply another way, and the turn is stopped, as an
    uninstall stops it."""
    GATE.clear()
    standin.fail("chat.startStream", "error:invalid_auth")
    app = await launch(db_url, AGENT, model(LONG))
    ts = await app.slack.mention("U0ALICE", "do the long thing", channel=CHANNEL)
    key = session_key("T0DEMO", CHANNEL, ts)

    async def stopped() -> bool:
        turns = await app.turns(key)
        return bool(turns) and turns[0].status == TurnStatus.CANCELLED

    await eventually(stopped, within=30, what="the turn was stopped")
    [turn] = await app.turns(key)
    assert turn.cancel_reason == UNINSTALLED
    await eventually(lambda: _idle(app, key), within=30)
    refused = [c for c in standin.calls if c.response.get("error") == "invalid_auth"]
    assert [c.method for c in refused] == ["chat.startStream"]
    assert standin.calls_to("chat.postMessage") == []  # not posted another way either
