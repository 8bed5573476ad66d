"""A request nobody answers is reminded, then escalated (the engine's durable timers, fired by the
clock beside its expiries): after `remind_after` the thread gets one note mentioning whoever may
answer; after `escalate_after` the request is posted again in the thread, with the same buttons,
for the escalation's answerers, who may answer it from then on (and not before). However many
clocks sweep, each fires once; a request answered first is never reminded. On SQLite and
PostgreSQL, in both serving modes."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest

from agent import (
    Agent,
    ConfirmationStatus,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    tool,
)
from bot.core.clock import Clock
from bot.slack.approval_blocks import APPROVE, ApprovalRef
from bot.slack.follow_up_text import ESCALATION_BLOCK
from bot.slack.home import EMPTY
from bot.slack.inbound import session_key
from bot.testing.workspace import Message, is_request
from tests.bot.harness import Running, eventually, idle, rendered_out, replies

CHANNEL = "C0REMIND"
HOUR = 3600
BOSS = "U0BOSS"
HELD: list[str] = []
"""Every order the provider put on hold: a confirmed write lands here exactly once."""
pytestmark = pytest.mark.usefixtures("serving")


@tool(
    effect="write",
    confirmation="required",
    remind_after=HOUR,
    escalate_after=(2 * HOUR, {"user": BOSS}),
)
async def place_hold(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Put an order on hold (the requester confirms; reminded after an hour, escalated to the
    boss after two)."""

    async def hold(authority: Any) -> dict[str, Any]:
        HELD.append(order_id)
        return {"held": order_id}

    effect = await ctx.run_effect(f"hold:{order_id}", hold, payload={"order_id": order_id})
    return dict(effect.value)


@tool
async def refund_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund once the requester approves (reminded after an hour)."""
    approved = await ctx.request_input(
        id="approve-refund",
        prompt=f"Approve the refund on order {order_id}?",
        schema={"type": "boolean"},
        remind_after=HOUR,
    )
    return {"refunded": approved is True}


AGENT = Agent(name="remind-ops", instructions="Help with orders.", tools=[place_hold, refund_order])
TOOLS = {"hold": "place_hold", "refund": "refund_order"}


def respond(request: Any, step: int) -> ScriptedReply:
    """ "hold order 7" proposes a hold on order 7, "refund order 7" asks to refund it; anything
    else (a tool's result, an answer's follow-up) gets a closing line."""
    last = request.messages[-1]
    found = re.search(r"\b(hold|refund) order (\d+)\s*$", getattr(last, "text", ""))
    if last.role == "user" and found:
        verb, order = found.groups()
        call = ToolCall(id=f"c_{verb}_{order}", name=TOOLS[verb], input={"order_id": order})
        return ScriptedReply(text="On it.", tool_calls=[call])
    return ScriptedReply(text="Done.")


@pytest.fixture(autouse=True)
def _no_holds() -> None:
    HELD.clear()


def _model() -> ScriptedModel:
    return ScriptedModel(responder=respond)


# helpers -------------------------------------------------------------------------------------


def clock_of(bot: Any, hours_later: float) -> Clock:
    """A `bot clock` process's ticker over `bot`'s engine, its clock `hours_later` ahead."""
    return Clock(
        runtime=bot.runtime,
        agent=bot.agent,
        delivery=bot.delivery,
        renderers=bot.renderers,
        team="T0DEMO",
        now=lambda: time.time() + hours_later * HOUR,
    )


async def two_clocks(app: Running, hours_later: float) -> list[int]:
    """Two clock processes sweeping at once: the web bot's engine and the runner's (in
    `web+worker` mode, two engines with their own connections)."""
    return list(
        await asyncio.gather(
            clock_of(app.bot, hours_later).expire(), clock_of(app.runner, hours_later).expire()
        )
    )


def has_buttons(message: Message) -> bool:
    return any(b.get("type") == "actions" for b in message.blocks or [])


def elements(message: Message) -> dict[str, dict[str, Any]]:
    """The message's buttons by action id (none once the request ended)."""
    actions = [b for b in message.blocks or [] if b.get("type") == "actions"]
    return {e["action_id"]: e for b in actions for e in b["elements"]}


def escalated(message: Message) -> bool:
    return any(b.get("block_id") == ESCALATION_BLOCK for b in message.blocks or [])


def context(message: Message) -> str:
    return " ".join(
        e.get("text", "")
        for b in message.blocks or []
        if b.get("type") == "context"
        for e in b.get("elements", [])
    )


def requests(standin: Any) -> list[Message]:
    """The request messages in the channel: the request itself, and any re-post of it."""
    return [m for m in standin.bot_messages(CHANNEL) if is_request(m)]


def originals(standin: Any) -> list[Message]:
    return [m for m in requests(standin) if not escalated(m)]


def reposts(standin: Any) -> list[Message]:
    return [m for m in requests(standin) if escalated(m)]


def notes(standin: Any) -> list[Message]:
    return [m for m in replies(standin, CHANNEL) if "Reminder for" in m.text]


def home(standin: Any, user: str) -> str:
    view = standin.home_views.get(user)
    return "" if view is None else str(standin.render_view(view))


def told(standin: Any, user: str, words: str) -> bool:
    return any(e["user"] == user and words in e["text"] for e in standin.ephemerals)


async def asked(app: Running, text: str) -> tuple[str, Message]:
    """U0ALICE asks; the thread's ts and the request the bot posted there, once idle."""
    ts = await app.slack.mention("U0ALICE", text, channel=CHANNEL)
    [request] = await eventually(lambda: originals(app.standin), within=30)
    await eventually(lambda: idle(app.standin, CHANNEL))
    assert request.thread_ts == ts
    return ts, request


async def proposal(app: Running, thread: str, approve: dict[str, Any]) -> Any:
    """The confirmation record of a proposed write (its Approve button names it)."""
    ref = ApprovalRef.decode(approve["value"])
    key = session_key("T0DEMO", CHANNEL, thread)
    return await app.bot.runtime.store.get_confirmation(key, ref.ident)


# tests ---------------------------------------------------------------------------------------


async def test_an_unanswered_request_is_reminded_once(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    ts, request = await asked(app, "refund order 42")

    assert await clock_of(app.runner, 0.5).expire() == 0  # not yet due
    await rendered_out(db_url)
    assert notes(standin) == []

    assert await clock_of(app.runner, 1.5).expire() == 0  # a reminder is no expiry
    [note] = await eventually(lambda: notes(standin), within=30)
    assert note.thread_ts == ts
    assert note.text == (
        ":alarm_clock: Reminder for <@U0ALICE>: this request has waited 1 hour for an answer: "
        "_Approve the refund on order 42?_"
    )
    await rendered_out(db_url)

    # later, and two clocks at once: the reminder fired already, nothing more is posted
    assert await clock_of(app.runner, 1.6).expire() == 0
    assert await two_clocks(app, 1.7) == [0, 0]
    await rendered_out(db_url)
    assert len(notes(standin)) == 1
    assert [m.ts for m in requests(standin)] == [request.ts]  # no re-post: nothing escalates
    assert has_buttons(request)  # still waiting for its answer
    assert standin.ephemerals == []

    # the request is still answerable as before
    await app.slack.click(
        "U0ALICE", elements(request)[APPROVE], channel=CHANNEL, message_ts=request.ts, thread_ts=ts
    )
    await eventually(lambda: any("Done." in m.text for m in replies(standin, CHANNEL)), within=30)
    await eventually(lambda: not has_buttons(request))
    await rendered_out(db_url)
    assert len(notes(standin)) == 1


async def test_an_escalated_write_is_reposted_and_the_boss_approves_it(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    ts, request = await asked(app, "hold order 42")
    approve = elements(request)[APPROVE]
    assert "Only <@U0ALICE> can answer" in context(request)

    # before the escalation the boss may not answer: refused, nothing written
    await app.slack.click(BOSS, approve, channel=CHANNEL, message_ts=request.ts, thread_ts=ts)
    refused = "You can't answer this request: only the person it asks can answer it."
    await eventually(lambda: told(standin, BOSS, refused))
    assert has_buttons(request)
    assert (await proposal(app, ts, approve)).status == ConfirmationStatus.PENDING
    await app.slack.open_home(BOSS)  # nothing in the boss's inbox yet
    await eventually(lambda: EMPTY in home(standin, BOSS))

    # an hour and a half on: reminded, not escalated (the boss still may not answer)
    assert await clock_of(app.runner, 1.5).expire() == 0
    await eventually(lambda: notes(standin), within=30)
    await rendered_out(db_url)
    assert reposts(standin) == []

    # past two hours: the request is posted again in the thread, for the boss
    assert await clock_of(app.runner, 2.5).expire() == 0
    [repost] = await eventually(lambda: reposts(standin), within=30)
    assert repost.thread_ts == ts
    assert repost.ts != request.ts
    first = next(b for b in repost.blocks or [] if b.get("type") == "context")
    assert first["block_id"] == ESCALATION_BLOCK
    assert first["elements"][0]["text"] == (
        ":rotating_light: Escalated: nobody answered in 2 hours, so <@U0BOSS> can answer it "
        "now too."
    )
    assert {a: e["value"] for a, e in elements(repost).items()} == {
        a: e["value"] for a, e in elements(request).items()
    }
    assert "Only <@U0ALICE>" not in context(repost), "no longer true: the boss may answer too"
    assert has_buttons(request)  # the original still waits too
    await app.slack.open_home(BOSS)  # the boss's inbox lists it now
    await eventually(lambda: "place_hold" in home(standin, BOSS), within=30)
    await rendered_out(db_url)
    assert HELD == []

    # the boss approves on the re-post: the write runs, once
    await app.slack.click(
        BOSS, elements(repost)[APPROVE], channel=CHANNEL, message_ts=repost.ts, thread_ts=ts
    )
    await eventually(lambda: HELD == ["42"], within=30)
    await eventually(lambda: any("Done." in m.text for m in replies(standin, CHANNEL)), within=30)
    record = await proposal(app, ts, approve)
    assert record.status == ConfirmationStatus.ACCEPTED
    assert record.by == BOSS
    await eventually(lambda: not has_buttons(request) and not has_buttons(repost), within=30)
    # both messages say who answered (the re-post shown settled like the request)
    assert f"Approved by <@{BOSS}>" in repost.text
    await eventually(lambda: f"Approved by <@{BOSS}>" in request.text)

    # nothing more: a later sweep, a late click by the requester
    assert await two_clocks(app, 5) == [0, 0]
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=request.ts, thread_ts=ts)
    await eventually(lambda: told(standin, "U0ALICE", "already answered"))
    await rendered_out(db_url)
    assert HELD == ["42"]
    assert [m.ts for m in requests(standin)] == [request.ts, repost.ts]  # no third post
    assert len(notes(standin)) == 1
    assert not has_buttons(request)
    assert not has_buttons(repost)


async def test_two_clocks_racing_the_escalation_post_it_once(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    ts, request = await asked(app, "hold order 43")

    # both timers are due at once: each fires once, whichever clock sweeps first
    assert await two_clocks(app, 2.5) == [0, 0]
    [repost] = await eventually(lambda: reposts(standin), within=30)
    await eventually(lambda: notes(standin), within=30)
    await rendered_out(db_url)
    assert await two_clocks(app, 3) == [0, 0]
    await rendered_out(db_url)
    assert [m.ts for m in reposts(standin)] == [repost.ts]
    assert len(notes(standin)) == 1
    assert [m.ts for m in originals(standin)] == [request.ts]
    assert repost.thread_ts == ts
    assert has_buttons(request)
    assert has_buttons(repost)
    assert HELD == []


async def test_a_request_answered_in_time_is_never_reminded(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    ts, request = await asked(app, "hold order 44")
    await app.slack.click(
        "U0ALICE", elements(request)[APPROVE], channel=CHANNEL, message_ts=request.ts, thread_ts=ts
    )
    await eventually(lambda: HELD == ["44"], within=30)
    await eventually(lambda: any("Done." in m.text for m in replies(standin, CHANNEL)), within=30)
    await eventually(lambda: not has_buttons(request))
    await rendered_out(db_url)
    posted = [m.ts for m in standin.bot_messages(CHANNEL)]

    assert await clock_of(app.runner, 1.5).expire() == 0
    assert await two_clocks(app, 3) == [0, 0]
    await rendered_out(db_url)
    assert notes(standin) == []
    assert reposts(standin) == []
    assert [m.ts for m in standin.bot_messages(CHANNEL)] == posted
    assert HELD == ["44"]
