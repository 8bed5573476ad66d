"""The thread shows the turn's state: the agent session is processing while it runs (the status
line naming the tool running), suspended while it waits for a person, active once the reply
ended; the session's title is the thread's first message. Where Slack keeps no agent session,
the status line alone; with neither, a first "Working on it" step."""

from __future__ import annotations

import pytest

from tests.bot.agents import AGENT, GATE, GATED, REFUND, SIMPLE, model
from tests.bot.harness import approval, buttons, eventually, idle, replies

CHANNEL = "C0STAT"
pytestmark = pytest.mark.usefixtures("serving")


def session_history(standin, ts):
    session = standin.session_of(CHANNEL, ts)
    return [] if session is None else session.history


def lines(standin):
    """What the status line said, each time it was set (an empty status clears it)."""
    return [s["status"] for s in standin.statuses if s.get("status")]


async def test_the_session_is_processing_while_the_turn_runs_then_active(db_url, launch, standin):
    GATE.clear()
    app = await launch(db_url, AGENT, model(GATED))
    ts = await app.slack.mention("U0ALICE", "do the long thing, please", channel=CHANNEL)
    await eventually(lambda: "slow" in GATE)
    await eventually(lambda: "is running wait for gate…" in lines(standin))
    session = standin.session_of(CHANNEL, ts)
    assert session is not None
    assert session.status == "processing"
    assert session.title == "do the long thing, please"
    assert session.initiator == "U0ALICE"

    GATE["slow"].set()
    await eventually(lambda: any("Second part" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    await eventually(lambda: session.status == "active")
    assert session.history == ["processing", "active"]
    # the reply's last stream said it: no separate call
    last_stop = standin.calls_to("chat.stopStream")[-1]
    assert last_stop.args.get("session_status") == "active"
    assert len(standin.calls_to("agents.sessions.setStatus")) == 1
    # the status line goes with the turn (just after its reply's last words)
    await eventually(lambda: standin.statuses[-1]["status"] == "")


async def test_a_parked_turn_is_suspended_until_the_answer(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: session_history(standin, ts)[-1:] == ["suspended"])
    await eventually(lambda: standin.statuses[-1]["status"] == "")

    approve, _ = buttons(message)
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: session_history(standin, ts)[-1:] == ["active"])
    assert session_history(standin, ts) == ["processing", "suspended", "processing", "active"]


async def test_the_title_is_the_threads_first_message_only(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE * 2))
    ts = await app.slack.mention("U0ALICE", "first\n question   here", channel=CHANNEL)
    await eventually(lambda: session_history(standin, ts)[-1:] == ["active"])
    await app.slack.reply("U0ALICE", "second one", channel=CHANNEL, thread_ts=ts)
    await eventually(lambda: session_history(standin, ts).count("active") == 2)
    titled = [c for c in standin.calls_to("agents.sessions.setStatus") if "title" in c.args]
    assert [c.args["title"] for c in titled] == ["first question here"]
    assert standin.session_of(CHANNEL, ts).title == "first question here"


async def test_without_agent_sessions_the_status_line_shows_progress(db_url, launch, standin):
    standin.agent_app = False  # an app not declared an agent
    app = await launch(db_url, AGENT, model(SIMPLE))
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert standin.sessions == {}
    assert len(standin.calls_to("agents.sessions.setStatus")) == 1  # asked once, then not
    assert "session_status" not in standin.calls_to("chat.stopStream")[-1].args
    assert "is working on it…" in lines(standin)
    (reply,) = replies(standin, CHANNEL)
    assert "status" not in reply.tasks


async def test_with_neither_the_reply_shows_a_first_step(db_url, launch, standin):
    standin.agent_app = False
    standin.status_channels = ()
    app = await launch(db_url, AGENT, model(SIMPLE))
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    (reply,) = replies(standin, CHANNEL)
    assert reply.tasks["status"]["title"] == "Working on it"
    assert reply.tasks["status"]["status"] == "complete"
