"""Slack's Stop button: the thread's turn stops durably, the model is not called again, the thread
says who stopped it and the session leaves `processing`. A Stop from another workspace, or an
unsigned one, stops nothing."""

from __future__ import annotations

import json

import pytest

from bot.inbound import session_key
from tests.bot.agents import AGENT, GATE, LONG, model
from tests.bot.harness import eventually, idle, replies

CHANNEL = "C0STOP"
pytestmark = pytest.mark.usefixtures("serving")


async def running(app, standin):
    """A turn parked in a long tool call (its reply streaming, the session processing)."""
    GATE.clear()
    ts = await app.slack.mention("U0ALICE", "do the long thing", channel=CHANNEL)
    await eventually(lambda: "long" in GATE)
    await eventually(lambda: any("First part" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: standin.session_of(CHANNEL, ts) is not None)
    return ts


async def test_stop_cancels_the_turn_and_the_model_is_not_called_again(db_url, launch, standin):
    scripted = model(LONG)
    app = await launch(db_url, AGENT, scripted)
    ts = await running(app, standin)
    calls = len(scripted.requests)

    response = await app.slack.stop("U0BOB", channel=CHANNEL, thread_ts=ts)
    assert response.status_code == 200
    key = session_key("T0DEMO", CHANNEL, ts)
    # durable before the ack: the turn is already marked to stop
    (turn,) = await app.turns(key)
    assert turn.cancel_reason == "stopped"

    # The long tool sees the cancellation and returns; the turn stops at its next checkpoint.
    await eventually(
        lambda: _status(app, key, "cancelled"), what="the turn ends cancelled", within=20
    )
    await eventually(lambda: any("_stopped" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert len(scripted.requests) == calls  # no model call after the Stop
    assert not any("Second part" in m.text for m in replies(standin, CHANNEL))
    session = standin.session_of(CHANNEL, ts)
    assert session is not None
    await eventually(lambda: session.status == "active")


async def _status(app, key, status):
    turns = await app.turns(key)
    return bool(turns) and turns[-1].status.value == status


async def test_a_stop_from_another_workspace_stops_nothing(db_url, launch, standin):
    scripted = model(LONG)
    app = await launch(db_url, AGENT, scripted)
    ts = await running(app, standin)

    response = await app.slack.stop("U0ALICE", channel=CHANNEL, thread_ts=ts, team_id="T0OTHER")
    assert response.status_code == 200
    event = app.slack.stop_event("U0ALICE", channel=CHANNEL, thread_ts=ts, streaming=[])
    event["user_team"] = "T0OTHER"  # a guest from a workspace the channel is shared with
    assert (await app.slack.post_event(event)).status_code == 200
    unsigned = json.dumps(app.slack.envelope(event))
    response = await app.slack.send(unsigned, content_type="application/json", secret="wrong")
    assert response.status_code == 401

    key = session_key("T0DEMO", CHANNEL, ts)
    (turn,) = await app.turns(key)
    assert turn.cancel_reason is None
    GATE["long"].set()
    await eventually(lambda: any("Second part" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: _status(app, key, "completed"))
