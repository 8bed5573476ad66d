"""Several calls of one model reply in Slack: they run side by side (three cards in progress at
once in the thread), and when each asks a person, each request gets its own approval message
for its own person, answered in any order; the reply goes on only once every one is answered.
On SQLite and PostgreSQL, in both serving modes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import Agent, ScriptedModel, ScriptedReply, ToolCall, ToolContext, tool
from bot.slack.inbound import session_key
from bot.testing.workspace import Message, is_request
from tests.bot.harness import Running, buttons, eventually, idle, replies

CHANNEL = "C0PARA"
pytestmark = pytest.mark.usefixtures("serving")

APPROVER = {"41": "U0ANN", "42": "U0BEN", "43": "U0CAT"}
GATES: dict[str, asyncio.Event] = {}


@tool
async def refund_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once the person responsible for it approves."""
    approved = await ctx.request_input(
        id="approve",
        prompt=f"Approve the refund on order {order_id}?",
        schema={"type": "boolean"},
        answerers={"user": APPROVER[order_id]},
    )
    return {"order_id": order_id, "refunded": approved is True}


@tool
async def check_carrier(order_id: str) -> dict[str, Any]:
    """Ask the carrier about an order (slow: returns when the test opens its gate)."""
    await GATES.setdefault(order_id, asyncio.Event()).wait()
    return {"order_id": order_id, "status": "in transit"}


AGENT = Agent(
    name="parallel-ops", instructions="Help with orders.", tools=[refund_order, check_carrier]
)


def _batch(tool_name: str, text: str, done: str) -> ScriptedModel:
    calls = [ToolCall(id=f"c{o}", name=tool_name, input={"order_id": o}) for o in APPROVER]
    return ScriptedModel([ScriptedReply(text=text, tool_calls=calls), ScriptedReply(text=done)])


def cards(message: Message) -> dict[str, tuple[str, str | None]]:
    return {
        str(t["id"]): (str(t["status"]), t.get("output"))
        for t in message.tasks.values()
        if t["id"] != "status"
    }


def approval_requests(standin: Any, channel: str) -> list[Message]:
    return [m for m in standin.bot_messages(channel) if is_request(m)]


def for_order(requests: list[Message], order: str) -> Message:
    return next(m for m in requests if f"order {order}?" in m.text)


async def test_three_calls_run_side_by_side_in_the_thread(db_url, launch, standin):
    GATES.clear()
    app: Running = await launch(
        db_url, AGENT, _batch("check_carrier", "Checking.", "All in transit."), TOOL_CONCURRENCY=4
    )
    await app.slack.mention("U0ALICE", "where are 41, 42 and 43?", channel=CHANNEL)

    def running_at_once() -> bool:
        shown = [cards(m) for m in replies(standin, CHANNEL)]
        return any(
            sorted(call for call, (status, _) in c.items() if status == "in_progress")
            == ["c41", "c42", "c43"]
            for c in shown
        )

    await eventually(running_at_once, within=30)
    GATES.setdefault("43", asyncio.Event()).set()
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c43"][0] == "complete")
    said = [s["status"] for s in standin.statuses if s.get("status")]
    assert said[-1] == "is running check carrier…", "the status line said the calls had ended"
    for order in ("41", "42"):
        GATES.setdefault(order, asyncio.Event()).set()
    await eventually(lambda: any("All in transit." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    [first, *_] = replies(standin, CHANNEL)
    assert {call: status for call, (status, _) in cards(first).items()} == {
        "c41": "complete",
        "c42": "complete",
        "c43": "complete",
    }


async def test_three_refunds_are_approved_in_reverse_order_by_three_people(db_url, launch, standin):
    model = _batch("refund_order", "Refunding all three.", "Refunds 41 and 43 done, 42 denied.")
    app: Running = await launch(db_url, AGENT, model, TOOL_CONCURRENCY=4)
    ts = await app.slack.mention("U0ALICE", "refund 41, 42 and 43", channel=CHANNEL)

    await eventually(lambda: len(approval_requests(standin, CHANNEL)) == 3, within=30)
    await eventually(lambda: idle(standin, CHANNEL))
    requests = approval_requests(standin, CHANNEL)
    for order, person in APPROVER.items():
        assert f"Only <@{person}> can answer" in _context(for_order(requests, order))
    [first] = replies(standin, CHANNEL)
    waiting = {call: status for call, (status, _) in cards(first).items()}
    assert waiting == {"c41": "pending", "c42": "pending", "c43": "pending"}

    # Each person's Home inbox lists their own request, and only theirs.
    await app.slack.open_home("U0BEN")
    await eventually(lambda: "order 42?" in _home(standin, "U0BEN"))
    assert "order 41?" not in _home(standin, "U0BEN")
    assert "order 43?" not in _home(standin, "U0BEN")

    # Ann may answer 41's request, not 43's: refused, nothing changes.
    def click(person: str, button: dict[str, Any], order: str) -> Any:
        message_ts = for_order(requests, order).ts
        return app.slack.click(person, button, channel=CHANNEL, message_ts=message_ts, thread_ts=ts)

    approve_43, _ = buttons(for_order(requests, "43"))
    await click("U0ANN", approve_43, "43")
    await eventually(lambda: standin.ephemerals)
    assert "can't answer" in standin.ephemerals[0]["text"]

    steps = len(model.requests)
    await click("U0CAT", approve_43, "43")
    _, deny_42 = buttons(for_order(requests, "42"))
    await click("U0BEN", deny_42, "42")
    (modal,) = await eventually(lambda: standin.modals)
    await app.slack.submit("U0BEN", modal.id, {"reason": {"text": "already refunded"}})
    await eventually(lambda: "Denied by <@U0BEN>" in for_order(requests, "42").text)
    assert "Approved by <@U0CAT>" in for_order(requests, "43").text
    key = session_key("T0DEMO", CHANNEL, ts)
    assert [r.call_id for r in await app.session(key).pending()] == ["c41"]
    assert len(model.requests) == steps, "the model was called while a request still waited"

    approve_41, _ = buttons(for_order(requests, "41"))
    await click("U0ANN", approve_41, "41")
    await eventually(lambda: any("42 denied." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert "Approved by <@U0ANN>" in for_order(requests, "41").text
    results = [m.result for m in model.requests[-1].messages if m.role == "tool"]
    assert results == [
        {"order_id": "41", "refunded": True},
        {"order_id": "42", "refunded": False},
        {"order_id": "43", "refunded": True},
    ]
    denied = ("error", "denied by <@U0BEN>: already refunded")
    await eventually(lambda: cards(replies(standin, CHANNEL)[0])["c42"] == denied)
    shown = cards(replies(standin, CHANNEL)[0])
    assert shown["c41"] == ("complete", "approved by <@U0ANN>")
    assert shown["c43"] == ("complete", "approved by <@U0CAT>")


def _context(message: Message) -> str:
    return " ".join(
        e.get("text", "")
        for b in message.blocks or []
        if b["type"] == "context"
        for e in b["elements"]
    )


def _home(standin: Any, user: str) -> str:
    view = standin.home_views.get(user)
    return "" if view is None else str(standin.render_view(view))
