"""Slack's Stop button: the thread's turn stops durably, reaching every call of the batch that is
running (they run side by side), the model is not called again, the thread says who stopped it
and the session leaves `processing`. A Stop from another workspace, or an unsigned one, stops
nothing; a Stop by someone whose turn it is not (a running one: not the person who asked, nor
whom the agent's policy allows; a parked one: nobody who may answer it) is refused to them alone
and the turn goes on, shown in full."""

from __future__ import annotations

import json

import pytest

from agent import STOP_POLICY, Agent, AnswerRequest
from bot.slack.approval_blocks import NO_LONGER_PENDING
from bot.slack.inbound import session_key
from tests.bot.agents import (
    AGENT,
    EXCLUSIVE_PAIR,
    GATE,
    LONG,
    LONG_BESIDE_OTHERS,
    REFUND,
    model,
)
from tests.bot.harness import approval, eventually, idle, replies

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


async def test_stop_reaches_every_running_call_and_the_model_is_not_called_again(
    db_url, launch, standin
):
    """The batch's calls run side by side: when Stop comes, two long calls are running and a
    lookup has finished. The Stop reaches both long calls (each returns only because it was
    asked to stop), the model is not called again, and the reply tells each call as it ended."""
    scripted = model(LONG_BESIDE_OTHERS)
    app = await launch(db_url, AGENT, scripted)
    ts = await running(app, standin)
    await eventually(lambda: "long-2" in GATE, what="the second long call is running too")
    (first,) = [m for m in replies(standin, CHANNEL) if "First part" in m.text]
    await eventually(
        lambda: first.tasks.get("c_then", {}).get("status") == "complete",
        what="the lookup has finished beside the long calls",
    )
    calls = len(scripted.requests)

    response = await app.slack.stop("U0ALICE", channel=CHANNEL, thread_ts=ts)
    assert response.status_code == 200
    key = session_key("T0DEMO", CHANNEL, ts)
    # durable before the ack: the turn is already marked to stop
    (turn,) = await app.turns(key)
    assert turn.cancel_reason == "stopped"

    # Both long tools see the cancellation and return; the turn stops once its batch has ended.
    await eventually(
        lambda: _status(app, key, "cancelled"), what="the turn ends cancelled", within=20
    )
    await eventually(
        lambda: any("stopped by <@U0ALICE>" in m.text for m in replies(standin, CHANNEL))
    )
    await eventually(lambda: idle(standin, CHANNEL))
    assert len(scripted.requests) == calls  # no model call after the Stop
    assert not any("Second part" in m.text for m in replies(standin, CHANNEL))
    assert not any(GATE[name].is_set() for name in ("long", "long-2"))
    results = {m.call_id: m.result for m in await app.session(key).transcript() if m.role == "tool"}
    assert results == {
        "c_long": {"stopped": True},
        "c_long_2": {"stopped": True},
        "c_then": {"order_id": "42", "item": "mug"},
    }, "the Stop reached both running calls; the lookup had finished before it"
    # The timeline settles every call as it really ended: the long calls were cut short by the
    # Stop, neither says "✓"; the lookup, done before the Stop, does; none is left running in
    # a reply that has ended. Slack stopped the stream itself, so the reply goes on by edits,
    # with its task cards as cards (not a list of text lines).
    (reply,) = [m for m in replies(standin, CHANNEL) if "stopped by" in m.text]
    cards = {i: (t["title"], t["status"], t.get("output")) for i, t in reply.tasks.items()}
    assert cards == {
        "c_long": ("Long task", "error", "stopped by <@U0ALICE>"),
        "c_long_2": ("Long task", "error", "stopped by <@U0ALICE>"),
        "c_then": ("Lookup order", "complete", None),
    }, reply.tasks
    assert any(b["type"] == "task_card" for b in reply.blocks or []), reply.blocks
    assert not any(line.startswith(("✓", "✗", "…", "·")) for line in reply.text.splitlines())
    session = standin.session_of(CHANNEL, ts)
    assert session is not None
    await eventually(lambda: session.status == "active")


async def test_a_stop_during_a_serial_tools_call_leaves_its_next_call_unrun(
    db_url, launch, standin
):
    """Serial semantics, kept by the tool itself: `exclusive_task` takes one call at a time
    (`@tool(concurrency=1)`), so its second call of the batch waits for the first. A Stop during
    the first starts none of the rest: the second never runs and the reply says so ("not run"),
    never "✓" nor still running."""
    scripted = model(EXCLUSIVE_PAIR)
    app = await launch(db_url, AGENT, scripted)
    ts = await running(app, standin)
    assert "then" not in GATE, "the second call must wait for the first"
    calls = len(scripted.requests)

    assert (await app.slack.stop("U0ALICE", channel=CHANNEL, thread_ts=ts)).status_code == 200
    key = session_key("T0DEMO", CHANNEL, ts)
    await eventually(
        lambda: _status(app, key, "cancelled"), what="the turn ends cancelled", within=20
    )
    await eventually(
        lambda: any("stopped by <@U0ALICE>" in m.text for m in replies(standin, CHANNEL))
    )
    await eventually(lambda: idle(standin, CHANNEL))
    assert len(scripted.requests) == calls
    assert "then" not in GATE, "the call after the Stop never started"
    results = {m.call_id: m.result for m in await app.session(key).transcript() if m.role == "tool"}
    assert results == {"c_long": {"stopped": True}, "c_then": {"cancelled": True}}
    (reply,) = [m for m in replies(standin, CHANNEL) if "stopped by" in m.text]
    cards = {i: (t["status"], t.get("output")) for i, t in reply.tasks.items()}
    assert cards == {
        "c_long": ("error", "stopped by <@U0ALICE>"),
        "c_then": ("error", "not run: stopped by <@U0ALICE>"),
    }, reply.tasks


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


def has_buttons(message) -> bool:
    return any(b["type"] == "actions" for b in message.blocks or [])


async def test_stop_ends_a_parked_approval_too(db_url, launch, standin):
    """Unlike a newer message, which never ends a park: the request loses its buttons and says
    who stopped it, the turn ends cancelled, a later click is "no longer pending"."""
    scripted = model(REFUND)
    app = await launch(db_url, AGENT, scripted)
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    key = session_key("T0DEMO", CHANNEL, ts)
    await eventually(lambda: standin.session_of(CHANNEL, ts).status == "suspended")
    calls = len(scripted.requests)

    assert (await app.slack.stop("U0ALICE", channel=CHANNEL, thread_ts=ts)).status_code == 200
    await eventually(lambda: _status(app, key, "cancelled"))
    await eventually(lambda: "Stopped by <@U0ALICE>" in message.text)
    assert not has_buttons(message)
    assert await app.session(key).pending() == []
    await eventually(lambda: standin.session_of(CHANNEL, ts).status == "active")
    assert len(scripted.requests) == calls

    approve, _ = buttons_of_the_original(standin, message)
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: standin.ephemerals)
    assert "no longer pending" in standin.ephemerals[-1]["text"]
    assert NO_LONGER_PENDING in message.text or "Stopped by" in message.text
    assert len(scripted.requests) == calls


def buttons_of_the_original(standin, message):
    """The buttons as first posted (the message has none now): a stale client still shows them."""
    posted = next(
        c for c in standin.calls_to("chat.postMessage") if c.response.get("ts") == message.ts
    )
    actions = next(b for b in posted.args["blocks"] if b["type"] == "actions")
    return actions["elements"]


NOT_YOURS = "You can't stop this: only the person who asked (or someone the agent's policy"


async def test_a_stop_by_someone_else_is_refused_to_them_and_the_reply_carries_on(
    db_url, launch, standin
):
    """Slack has stopped the reply's stream when it sends the event; the turn, not stopped,
    goes on in the same message."""
    scripted = model(LONG)
    app = await launch(db_url, AGENT, scripted)
    ts = await running(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    (first,) = [m for m in replies(standin, CHANNEL) if "First part" in m.text]

    assert (await app.slack.stop("U0BOB", channel=CHANNEL, thread_ts=ts)).status_code == 200
    (ephemeral,) = await eventually(lambda: standin.ephemerals)
    assert (ephemeral["user"], ephemeral["thread_ts"]) == ("U0BOB", ts)
    assert ephemeral["text"].startswith(NOT_YOURS), ephemeral["text"]
    assert ephemeral["text"].endswith("Nothing was stopped.")
    (turn,) = await app.turns(key)
    assert turn.cancel_reason is None

    GATE["long"].set()
    await eventually(lambda: _status(app, key, "completed"), within=20)
    await eventually(lambda: "Second part" in first.text and not first.streaming)
    assert not any("stopped" in m.text for m in replies(standin, CHANNEL))
    assert len(scripted.requests) == 2


async def test_a_stop_by_someone_who_may_not_answer_the_park_changes_nothing(
    db_url, launch, standin
):
    """Ending a park is a Deny by another name: bob may not deny alice's request."""
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    key = session_key("T0DEMO", CHANNEL, ts)

    assert (await app.slack.stop("U0BOB", channel=CHANNEL, thread_ts=ts)).status_code == 200
    (ephemeral,) = await eventually(lambda: standin.ephemerals)
    assert ephemeral["text"] == (
        "You can't stop this: it is waiting for an answer that is not yours to give; only the "
        "person who asked, or someone who may answer it, can stop it. Nothing was stopped."
    )
    assert has_buttons(message)
    assert [r.id for r in await app.session(key).pending()] == ["approve-refund"]

    approve, _ = buttons_of_the_original(standin, message)
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))


MODERATOR = "U0MOD"


async def moderators_stop(request: AnswerRequest) -> bool:
    return request["policy"] == STOP_POLICY and request["principal"].get("user") == MODERATOR


async def test_whom_the_agents_policy_allows_may_stop_a_running_turn(db_url, launch, standin):
    agent = Agent(
        name="test-ops",
        instructions="Help with orders.",
        tools=AGENT.tools,
        authorize_answer=moderators_stop,
    )
    app = await launch(db_url, agent, model(LONG))
    ts = await running(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)

    assert (await app.slack.stop(MODERATOR, channel=CHANNEL, thread_ts=ts)).status_code == 200
    await eventually(lambda: _status(app, key, "cancelled"), within=20)
    await eventually(
        lambda: any(f"stopped by <@{MODERATOR}>" in m.text for m in replies(standin, CHANNEL))
    )
    assert standin.ephemerals == []
