"""A request nobody answers in time expires (the engine's durable timer, fired by the clock
beside its schedules): its message says so and loses its buttons, the turn goes on with the
expiry for the model to read, and a click after it is "no longer pending"."""

from __future__ import annotations

import time

import pytest

from bot.core.clock import Clock
from bot.slack.approval_blocks import EXPIRED
from bot.slack.inbound import session_key
from tests.bot.agents import AGENT, TIMED, model, timed_hold_reply
from tests.bot.harness import approval, buttons, eventually, idle, replies

CHANNEL = "C0EXPI"
pytestmark = pytest.mark.usefixtures("serving")


def clock_of(app, hours_later: float) -> Clock:
    """The `bot clock` process's ticker, its clock `hours_later` ahead."""
    runner = app.runner
    return Clock(
        runtime=runner.runtime,
        agent=runner.agent,
        delivery=runner.delivery,
        renderers=runner.renderers,
        team="T0DEMO",
        now=lambda: time.time() + hours_later * 3600,
    )


def has_buttons(message) -> bool:
    return any(b["type"] == "actions" for b in message.blocks or [])


async def test_an_unanswered_park_expires_and_the_turn_goes_on(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(TIMED))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    approve, _ = buttons(message)

    assert await clock_of(app, 0.5).expire() == 0  # not yet due
    assert await clock_of(app, 2).expire() == 1
    await eventually(lambda: EXPIRED in message.text)
    assert not has_buttons(message)
    await eventually(lambda: any("in time" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: standin.session_of(CHANNEL, ts).status == "active")
    assert await clock_of(app, 3).expire() == 0  # each timer fires once

    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: standin.ephemerals)
    assert "no longer pending" in standin.ephemerals[-1]["text"]
    turns = await app.turns(session_key("T0DEMO", CHANNEL, ts))
    assert [t.status.value for t in turns] == ["completed"]


async def test_an_unconfirmed_write_expires(db_url, launch, standin):
    from agent import ScriptedModel

    app = await launch(db_url, AGENT, ScriptedModel(responder=timed_hold_reply))
    ts = await app.slack.mention("U0ALICE", "hold order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))

    assert await clock_of(app, 2).expire() == 1
    await eventually(lambda: EXPIRED in message.text)
    assert not has_buttons(message)
    await eventually(
        lambda: any("expired unconfirmed" in m.text for m in replies(standin, CHANNEL))
    )
    key = session_key("T0DEMO", CHANNEL, ts)
    (record,) = await app.session(key).confirmations()
    assert record.status.value == "expired"
