"""Two of three must approve, in Slack: the request's message says so, each vote is told to its
voter and shown on the message (buttons kept for the others), the Home inbox shows the
progress to those who may still vote and not to those who did, a vote from outside the list or
another workspace changes nothing, and the second approval resumes the reply, which names both
approvers. On SQLite and PostgreSQL, in both serving modes."""

from __future__ import annotations

from typing import Any

import pytest

from agent import Agent, Quorum, ScriptedModel, ScriptedReply, ToolCall, ToolContext, tool
from bot.slack.inbound import session_key
from bot.testing.workspace import Message, is_request
from tests.bot.harness import Running, buttons, eventually, idle, replies

CHANNEL = "C0QUORUM"
APPROVERS = ["U0ANN", "U0BEN", "U0CAT"]
pytestmark = pytest.mark.usefixtures("serving")


@tool
async def refund_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order once two of the finance team approve."""
    approved = await ctx.request_input(
        id="approve",
        prompt=f"Approve the $500 refund on order {order_id}?",
        answerers=Quorum(2, users=APPROVERS),
    )
    return {"order_id": order_id, "refunded": approved is True}


AGENT = Agent(name="quorum-ops", instructions="Help with orders.", tools=[refund_order])


def _model() -> ScriptedModel:
    call = ToolCall(id="c1", name="refund_order", input={"order_id": "42"})
    return ScriptedModel(
        [ScriptedReply(text="Asking finance.", tool_calls=[call]), ScriptedReply(text="Refunded.")]
    )


def _request(standin: Any) -> Message:
    [request] = [m for m in standin.bot_messages(CHANNEL) if is_request(m)]
    return request


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


def _has_buttons(message: Message) -> bool:
    return any(b.get("type") == "actions" for b in message.blocks or [])


async def test_two_of_three_approve_in_slack(db_url, launch, standin):
    model = _model()
    app: Running = await launch(db_url, AGENT, model)
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    await eventually(lambda: any(is_request(m) for m in standin.bot_messages(CHANNEL)), within=30)
    await eventually(lambda: idle(standin, CHANNEL))
    request = _request(standin)
    assert "Needs 2 approvals from <@U0ANN>, <@U0BEN>, <@U0CAT>" in _context(request)
    approve, _ = buttons(request)

    async def click(person: str, **kw: Any) -> None:
        await app.slack.click(
            person, approve, channel=CHANNEL, message_ts=request.ts, thread_ts=ts, **kw
        )

    def told(person: str, words: str) -> bool:
        return any(e["user"] == person and words in e["text"] for e in standin.ephemerals)

    # The asker is not one of the three; the same id in another workspace is another person.
    await click("U0ALICE")
    await eventually(lambda: told("U0ALICE", "can't answer"))
    await click("U0ANN", team_id="T0OTHER")
    await eventually(lambda: told("U0ANN", "can't answer"))
    session = app.session(session_key("T0DEMO", CHANNEL, ts))
    [waiting] = await session.pending()
    nobody = await session.tally("input", waiting.turn_id, waiting.id)
    assert nobody is not None
    assert nobody.approved_by == nobody.denied_by == ()

    await click("U0ANN")
    await eventually(lambda: told("U0ANN", "Your approval is counted: "))
    progress = "1 of 2 approvals: approved by <@U0ANN>"
    await eventually(lambda: progress in _context(_request(standin)), within=30)
    assert _has_buttons(_request(standin)), "the others' buttons were taken away"
    assert len(model.requests) == 1, "the model was called on one vote of two"

    # Ann again: her first vote stands. Ben's inbox shows the progress; Ann's no longer lists it.
    await click("U0ANN")
    await eventually(lambda: told("U0ANN", "your first vote stands"))
    await app.slack.open_home("U0BEN")
    await eventually(lambda: "order 42?" in _home(standin, "U0BEN"))
    assert "approved by <@U0ANN>" in _home(standin, "U0BEN")
    await app.slack.open_home("U0ANN")
    await eventually(lambda: "U0ANN" in standin.home_views)
    assert "order 42?" not in _home(standin, "U0ANN")

    await click("U0BEN")
    await eventually(lambda: any("Refunded." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    try:
        await eventually(lambda: "Approved by <@U0ANN>, <@U0BEN>" in _request(standin).text)
    except TimeoutError:
        raise AssertionError(
            repr(_request(standin).text) + repr(_request(standin).blocks)
        ) from None
    assert not _has_buttons(_request(standin))
    [result] = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert result.result == {"order_id": "42", "refunded": True}
    assert result.note is not None
    assert "approved by U0ANN, U0BEN" in result.note

    # Cat's click after the request resolved: told so, nothing changes.
    await click("U0CAT")
    await eventually(lambda: told("U0CAT", "already answered"))
    assert len(model.requests) == 2
