"""The operator's `bot cancel`, run as a command in its own process against the bot's database,
shows in the Slack thread as Slack's Stop does: the reply ends "stopped by …", a parked
approval loses its buttons and says who stopped it, and the model is not called again. The
command never calls Slack: the bot's renderer, woken through the database, does."""

from __future__ import annotations

import pytest

from bot.slack.inbound import session_key
from tests.bot.agents import AGENT, GATE, LONG, REFUND, model
from tests.bot.harness import approval, eventually, idle, replies
from tests.support import children

CHANNEL = "C0OPER"
pytestmark = pytest.mark.usefixtures("serving")


async def _cancel(db_url: str, *args: str) -> children.Ran:
    return await children.run("bot.cli.main", "cancel", *args, "--database-url", db_url)


async def test_bot_cancel_stops_a_streaming_reply_and_the_thread_says_so(db_url, launch, standin):
    scripted = model(LONG)
    app = await launch(db_url, AGENT, scripted)
    GATE.clear()
    ts = await app.slack.mention("U0ALICE", "do the long thing", channel=CHANNEL)
    await eventually(lambda: "long" in GATE)
    await eventually(lambda: any("First part" in m.text for m in replies(standin, CHANNEL)))
    calls = len(scripted.requests)
    key = session_key("T0DEMO", CHANNEL, ts)

    done = await _cancel(db_url, key, "--by", "U0BOB")

    assert done.returncode == 0, done.stderr
    await eventually(
        lambda: any("stopped by <@U0BOB>" in m.text for m in replies(standin, CHANNEL)),
        what="the reply says who stopped it",
        within=30,
    )
    await eventually(lambda: idle(standin, CHANNEL))
    assert len(scripted.requests) == calls  # no model call after the cancel
    assert not any("Second part" in m.text for m in replies(standin, CHANNEL))
    session = standin.session_of(CHANNEL, ts)
    assert session is not None
    await eventually(lambda: session.status == "active")


async def test_bot_cancel_ends_a_parked_approval_and_its_message_says_so(db_url, launch, standin):
    scripted = model(REFUND)
    app = await launch(db_url, AGENT, scripted)
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    await eventually(lambda: standin.session_of(CHANNEL, ts).status == "suspended")
    calls = len(scripted.requests)
    key = session_key("T0DEMO", CHANNEL, ts)

    done = await _cancel(db_url, key, "--by", "U0BOB")

    assert done.returncode == 0, done.stderr
    await eventually(lambda: "Stopped by <@U0BOB>" in message.text, within=30)
    assert not any(b.get("type") == "actions" for b in message.blocks or [])
    assert await app.session(key).pending() == []
    await eventually(lambda: standin.session_of(CHANNEL, ts).status == "active")
    assert len(scripted.requests) == calls


async def test_bot_cancel_may_stop_anything_and_the_thread_says_an_operator_did(
    db_url, launch, standin
):
    """The operator holds the database: no principal, no restriction, and naming nobody the
    thread says who did it, not just "stopped"."""
    app = await launch(db_url, AGENT, model(LONG))
    GATE.clear()
    ts = await app.slack.mention("U0ALICE", "do the long thing", channel=CHANNEL)
    await eventually(lambda: "long" in GATE)
    await eventually(lambda: any("First part" in m.text for m in replies(standin, CHANNEL)))
    key = session_key("T0DEMO", CHANNEL, ts)
    (turn,) = await app.turns(key)

    done = await _cancel(db_url, key, "--turn", turn.turn_id)

    assert done.returncode == 0, done.stderr
    await eventually(
        lambda: any("stopped by an operator" in m.text for m in replies(standin, CHANNEL)),
        within=30,
    )
    assert (await app.turns(key))[0].cancelled_by == "operator"


async def test_bot_cancel_of_a_park_says_an_operator_stopped_it(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))

    done = await _cancel(db_url, session_key("T0DEMO", CHANNEL, ts))

    assert done.returncode == 0, done.stderr
    await eventually(lambda: "Stopped by an operator" in message.text, within=30)
    assert "<@operator>" not in message.text
