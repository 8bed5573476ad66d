"""A write the agent's rule approves (`approve_automatically`) needs no click: no approval
message is posted, the call's card says "approved by policy …" while it runs and keeps saying
so under its ✓, the reply goes on in the same turn, and the effect runs once. A write the rule
turns down is posted for a person as before. A yes-or-no request the rule answers is posted
to nobody either. On SQLite and PostgreSQL, in both serving modes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent import PolicyApproval, ProposedWrite, ScriptedReply, ToolCall
from bot.testing.workspace import Message, is_request
from tests.bot.agents import AGENT, HOLDS, model
from tests.bot.harness import Running, approval, eventually, idle, replies

CHANNEL = "C0POLICY"
pytestmark = pytest.mark.usefixtures("serving")


async def holds_on_small_orders(proposal: ProposedWrite) -> PolicyApproval | None:
    """Order 7 is small enough to hold without asking anyone, and a refund's request of $5 or
    less is answered yes; the rest go to a person."""
    if proposal.tool == "place_hold" and proposal.arguments.get("order_id") == "7":
        return PolicyApproval(policy="small-holds", reason="order 7 is under $20")
    amount = proposal.arguments.get("amount")
    if proposal.kind == "input" and proposal.tool == "issue_refund" and amount <= 5:
        return PolicyApproval(policy="tiny-refunds", reason=f"${amount} is at most $5")
    return None


POLICY_AGENT = replace(AGENT, approve_automatically=holds_on_small_orders)


def _hold(order_id: str) -> Any:
    call = ToolCall(id="c_hold", name="place_hold", input={"order_id": order_id})
    script = [ScriptedReply(text="Holding it.", tool_calls=[call]), ScriptedReply(text="Held.")]
    return model(script)


def cards(message: Message) -> dict[str, tuple[str, str | None]]:
    return {
        str(t["id"]): (str(t["status"]), t.get("output"))
        for t in message.tasks.values()
        if t["id"] != "status"
    }


async def test_a_write_the_rule_approves_runs_without_a_click(db_url, launch, standin):
    HOLDS.clear()
    app: Running = await launch(db_url, POLICY_AGENT, _hold("7"))
    await app.slack.mention("U0ALICE", "hold order 7", channel=CHANNEL)
    await eventually(lambda: any("Held." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert not any(is_request(m) for m in standin.bot_messages(CHANNEL))
    shown = [cards(m).get("c_hold") for m in replies(standin, CHANNEL)]
    assert ("complete", "approved by policy small-holds") in shown, shown
    assert not any(card is not None and card[0] in ("pending", "error") for card in shown)
    assert [h["order_id"] for h in HOLDS] == ["7"]


def _refund(amount: float) -> Any:
    call = ToolCall(id="c_refund", name="issue_refund", input={"order_id": "9", "amount": amount})
    script = [ScriptedReply(text="Refunding.", tool_calls=[call]), ScriptedReply(text="Refunded.")]
    return model(script)


async def test_a_request_the_rule_answers_posts_no_buttons(db_url, launch, standin):
    app: Running = await launch(db_url, POLICY_AGENT, _refund(3.0))
    await app.slack.mention("U0ALICE", "refund order 9", channel=CHANNEL)
    await eventually(lambda: any("Refunded." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert not any(is_request(m) for m in standin.bot_messages(CHANNEL))
    shown = [cards(m).get("c_refund") for m in replies(standin, CHANNEL)]
    assert ("complete", "approved by policy tiny-refunds") in shown, shown


async def test_a_request_the_rule_declines_is_posted_for_a_person(db_url, launch, standin):
    app: Running = await launch(db_url, POLICY_AGENT, _refund(30.0))
    await app.slack.mention("U0ALICE", "refund order 9", channel=CHANNEL)
    request = await eventually(lambda: approval(standin, CHANNEL))
    assert "$30.00 refund on order 9" in request.text
    assert not any("Refunded." in m.text for m in replies(standin, CHANNEL))


async def test_a_write_the_rule_turns_down_waits_for_a_person(db_url, launch, standin):
    HOLDS.clear()
    app: Running = await launch(db_url, POLICY_AGENT, _hold("42"))
    await app.slack.mention("U0ALICE", "hold order 42", channel=CHANNEL)
    request = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    assert "place_hold" in request.text or "hold" in request.text.lower()
    first = replies(standin, CHANNEL)[0]  # the model goes on; the proposal waits
    assert cards(first)["c_hold"] == ("pending", "waiting for approval")
    assert HOLDS == []
