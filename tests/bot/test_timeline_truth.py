"""The thread tells the truth about every tool call: each task card ends in the state the call
really ended in (done, failed, denied, expired, stopped), the "waiting for approval" line of the
message a turn parked in says how its request ended (whichever surface ended it: a click, the
engine's API, an expiry, a Stop), the status line reads once, and a reply the model ended with
no words still ends with a line of its own."""

from __future__ import annotations

from typing import Any

import pytest

from agent import ScriptedModel, ScriptedReply, ToolCall
from bot.core.clock import Clock
from bot.slack.inbound import session_key
from bot.testing.workspace import Message
from tests.bot.agents import AGENT, REFUND, TIMED, hold_model, model, timed_hold_reply
from tests.bot.harness import Running, approval, buttons, eventually, idle, replies

CHANNEL = "C0TRUTH"
pytestmark = pytest.mark.usefixtures("serving")


def cards(message: Message) -> dict[str, tuple[str, str | None]]:
    """A message's task cards (streamed or posted as blocks) as (status, output), by call."""
    return {
        str(t["id"]): (str(t["status"]), t.get("output"))
        for t in message.tasks.values()
        if t["id"] != "status"
    }


async def parked(app: Running, standin: Any, text: str = "refund order 42") -> tuple[str, Message]:
    ts = await app.slack.mention("U0ALICE", text, channel=CHANNEL)
    request = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    return ts, request


async def deny_with(app: Running, standin: Any, ts: str, request: Message, reason: str) -> None:
    _, deny = buttons(request)
    await app.slack.click("U0ALICE", deny, channel=CHANNEL, message_ts=request.ts, thread_ts=ts)
    (modal,) = await eventually(lambda: standin.modals)
    await app.slack.submit("U0ALICE", modal.id, {"reason": {"text": reason}})


def clock_of(app: Running, hours_later: float) -> Clock:
    import time

    runner = app.runner
    return Clock(
        runtime=runner.runtime,
        agent=runner.agent,
        delivery=runner.delivery,
        renderers=runner.renderers,
        team="T0DEMO",
        now=lambda: time.time() + hours_later * 3600,
    )


async def test_a_denied_call_is_shown_denied_in_both_of_its_messages(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, request = await parked(app, standin)
    [first] = replies(standin, CHANNEL)
    assert cards(first) == {
        "c_lookup": ("complete", None),
        "c_refund": ("pending", "waiting for approval"),
    }

    await deny_with(app, standin, ts, request, "wrong order")
    await eventually(lambda: len(replies(standin, CHANNEL)) == 2 and idle(standin, CHANNEL))
    denied = ("error", "denied by <@U0ALICE>: wrong order")
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c_refund"] == denied)
    first, second = replies(standin, CHANNEL)
    assert cards(first) == {"c_lookup": ("complete", None), "c_refund": denied}
    assert cards(second)["c_refund"] == denied  # the call returned, but it was refused
    assert first.text.startswith("Looking it up.")  # the words stay; the cards stay cards
    assert any(b["type"] == "task_card" for b in first.blocks or [])


async def test_an_answer_from_another_surface_updates_the_waiting_line(db_url, launch, standin):
    """Answered by host code (what the HTTP API and the CLI call), not from Slack."""
    app = await launch(db_url, AGENT, model(REFUND))
    ts, _ = await parked(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    [turn] = await app.turns(key)
    await app.session(key).resume(turn.turn_id, "approve-refund", True, by="U0ALICE")

    approved = ("complete", "approved by <@U0ALICE>")
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c_refund"] == approved)
    second = replies(standin, CHANNEL)[1]
    assert cards(second)["c_refund"] == approved


async def test_a_stop_while_parked_says_who_stopped_the_waiting_call(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, _ = await parked(app, standin)
    await app.slack.stop("U0ALICE", channel=CHANNEL, thread_ts=ts)  # she may answer it

    stopped = ("error", "stopped by <@U0ALICE>")
    await eventually(lambda: cards(replies(standin, CHANNEL)[0]).get("c_refund") == stopped)
    await eventually(lambda: idle(standin, CHANNEL))
    assert not any(
        status in ("pending", "in_progress", "complete") and call == "c_refund"
        for m in replies(standin, CHANNEL)
        for call, (status, _) in cards(m).items()
    )


async def test_an_expired_request_is_shown_expired(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(TIMED))
    await parked(app, standin)
    assert await clock_of(app, 2).expire() == 1

    expired = ("error", "expired: nobody answered in time")
    await eventually(lambda: any("in time" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c_timed"] == expired)
    second = replies(standin, CHANNEL)[1]
    assert cards(second)["c_timed"] == expired  # the tool caught the expiry and returned


async def test_a_proposed_write_waits_then_shows_how_it_was_answered(db_url, launch, standin):
    app = await launch(db_url, AGENT, hold_model())
    ts, request = await parked(app, standin, "hold order 42")
    first = replies(standin, CHANNEL)[0]
    assert cards(first)["c_hold"] == ("pending", "waiting for approval")  # not run: not "✓"

    await deny_with(app, standin, ts, request, "not now")
    denied = ("error", "denied by <@U0ALICE>: not now")
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c_hold"] == denied)


async def test_an_unconfirmed_write_is_shown_expired(db_url, launch, standin):
    app = await launch(db_url, AGENT, ScriptedModel(responder=timed_hold_reply))
    await parked(app, standin, "hold order 42")
    assert await clock_of(app, 2).expire() == 1
    expired = ("error", "expired: nobody answered in time")
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c_th"] == expired)


async def test_the_status_line_reads_once_and_names_the_tool(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    await parked(app, standin)
    said = [s for s in standin.statuses if s.get("status")]
    assert said, "no status line was shown"
    assert all(not s.get("loading_messages") for s in said), said  # said once, not twice
    assert {s["status"] for s in said} >= {"is working on it…", "is running issue refund…"}


SILENT = [
    ScriptedReply(
        text="",
        tool_calls=[
            ToolCall(id="c_lookup", name="lookup_order", input={"order_id": "42"}),
            ToolCall(id="c_bad", name="lookup_order", input={"order": "no id"}),
        ],
    ),
    ScriptedReply(text=""),
]


async def test_a_reply_the_model_ended_without_words_says_what_its_tools_did(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SILENT))
    ts = await app.slack.mention("U0ALICE", "look up order 42", channel=CHANNEL)
    await eventually(lambda: any("_Done:" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    [reply] = replies(standin, CHANNEL)
    assert "_Done: Lookup order ✓, Lookup order ✗ (failed)._" in reply.text
    key = session_key("T0DEMO", CHANNEL, ts)
    transcript = await app.session(key).transcript()
    assert not any("Done:" in (getattr(m, "text", "") or "") for m in transcript)


async def test_a_reply_with_no_words_and_no_tools_is_not_silence(db_url, launch, standin):
    app = await launch(db_url, AGENT, model([ScriptedReply(text="")]))
    await app.slack.mention("U0ALICE", "hm", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    [reply] = replies(standin, CHANNEL)
    assert reply.text == "_(The agent had nothing to add.)_"
