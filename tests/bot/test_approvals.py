"""Approve / Deny: only the right person's click answers, once; everyone else is told why."""

from __future__ import annotations

import asyncio

import pytest

from bot.slack.approval_blocks import NO_LONGER_PENDING
from bot.slack.inbound import session_key
from tests.bot.agents import (
    AGENT,
    BOSS,
    POLICY,
    REFUND,
    SHIPMENTS,
    SHIPPING,
    model,
    ship_model,
)
from tests.bot.harness import approval, buttons, eventually, idle, replies

CHANNEL = "C0APPR"
pytestmark = pytest.mark.usefixtures("serving")


async def parked(app, standin, script=REFUND, who="U0ALICE"):
    ts = await app.slack.mention(who, "refund order 42", channel=CHANNEL, twin=True)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    return ts, message


def context_text(message):
    return " ".join(
        e.get("text", "")
        for b in message.blocks or []
        if b["type"] == "context"
        for e in b["elements"]
    )


async def test_the_requester_approves_and_the_reply_continues(db_url, launch, standin):
    scripted = model(REFUND)
    app = await launch(db_url, AGENT, scripted)
    ts, message = await parked(app, standin)
    assert "Only <@U0ALICE> can answer" in context_text(message)
    approve, _ = buttons(message)
    assert approve["confirm"]["confirm"]["text"] == "Approve"

    response = await app.slack.click(
        "U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
    )
    assert response.status_code == 200
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert "Approved by <@U0ALICE>" in message.text
    assert not any(b["type"] == "actions" for b in message.blocks)
    turns = await app.turns(session_key("T0DEMO", CHANNEL, ts))
    assert [t.status.value for t in turns] == ["completed"]
    assert turns[0].result["text"] == "Refund done."
    assert standin.ephemerals == []


async def test_a_click_by_someone_else_is_refused_and_changes_nothing(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    approve, deny = buttons(message)
    edits = message.edits if hasattr(message, "edits") else message.edited

    for button in (approve, deny):
        response = await app.slack.click(
            "U0MALLORY", button, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
        )
        assert response.status_code == 200
    await eventually(lambda: len(standin.ephemerals) == 2)
    assert {e["user"] for e in standin.ephemerals} == {"U0MALLORY"}
    assert "can't answer" in standin.ephemerals[0]["text"]
    assert message.edited == edits
    assert any(b["type"] == "actions" for b in message.blocks)
    session = app.session(session_key("T0DEMO", CHANNEL, ts))
    assert [r.id for r in await session.pending()] == ["approve-refund"]


async def test_a_double_click_resumes_once(db_url, launch, standin):
    scripted = model(REFUND)
    app = await launch(db_url, AGENT, scripted)
    ts, message = await parked(app, standin)
    approve, _ = buttons(message)
    before = len(scripted.requests)

    first, second = await asyncio.gather(
        app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts),
        app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts),
    )
    assert first.status_code == second.status_code == 200
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    await eventually(lambda: len(standin.ephemerals) == 1)
    assert "already answered" in standin.ephemerals[0]["text"]
    assert len(scripted.requests) == before + 1  # one resumed model step, not two
    assert sum("Refund done." in m.text for m in replies(standin, CHANNEL)) == 1
    assert "Approved by <@U0ALICE>" in message.text


async def test_a_click_after_a_reset_says_no_longer_pending(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    approve, _ = buttons(message)
    await app.session(session_key("T0DEMO", CHANNEL, ts)).reset()

    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: standin.ephemerals)
    assert "no longer pending" in standin.ephemerals[0]["text"]
    await eventually(lambda: NO_LONGER_PENDING in message.text)
    assert not any(b["type"] == "actions" for b in message.blocks)


async def test_a_policy_answerer_is_decided_by_authorize_answer(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(POLICY))
    ts, message = await parked(app, standin, script=POLICY)
    assert "managers" in context_text(message)
    approve, _ = buttons(message)

    # the requester is not a manager: a grant is needed and the hook refuses it
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: standin.ephemerals)
    assert standin.ephemerals[0]["user"] == "U0ALICE"
    assert any(b["type"] == "actions" for b in message.blocks)

    await app.slack.click(BOSS, approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: any("manager said yes" in m.text for m in replies(standin, CHANNEL)))
    assert f"Approved by <@{BOSS}>" in message.text
    assert len(standin.ephemerals) == 1


async def rendering_went_idle(app, key):
    await eventually(
        lambda: _inactive(app, key), what="the renderer went idle after posting the approval"
    )


async def _inactive(app, key):
    target = await app.bot.delivery.get_target(key)
    return target is not None and not target.active


async def test_the_reply_after_approve_is_posted_when_rendering_had_gone_idle(
    db_url, launch, standin
):
    """Hours later nobody is rendering the parked thread; the click must bring rendering back
    for the resumed turn, whichever commits first: the click's wake-up or the resume."""
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    await rendering_went_idle(app, session_key("T0DEMO", CHANNEL, ts))
    approve, _ = buttons(message)

    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert sum("Refund done." in m.text for m in replies(standin, CHANNEL)) == 1


async def test_a_capability_shows_its_details_and_writes_only_what_was_approved(
    db_url, launch, standin
):
    """`confirmation="capability"`: the message shows the details the tool asked about; after
    Approve the tool runs again and writes them, once. A price that moved in between is asked
    about again, on a new message, and nothing is written on the old approval."""
    SHIPMENTS.clear()
    SHIPPING["42"] = 7
    app = await launch(db_url, AGENT, ship_model())
    ts = await app.slack.mention("U0ALICE", "ship order 42", channel=CHANNEL, twin=True)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    assert "Ship order 42?" in message.text
    assert '"price": 7' in message.text
    assert "Only <@U0ALICE> can answer" in context_text(message)

    SHIPPING["42"] = 9  # the price moved while Alice was reading
    approve, _ = buttons(message)
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    await eventually(lambda: "Approved by <@U0ALICE>" in message.text)
    asked_again = await eventually(
        lambda: next(
            (m for m in standin.bot_messages(CHANNEL) if m is not message and m.blocks and
             any(b.get("type") == "actions" for b in m.blocks)),
            None,
        )
    )  # fmt: skip
    assert '"price": 9' in asked_again.text
    assert SHIPMENTS == []

    approve, _ = buttons(asked_again)
    await app.slack.click(
        "U0ALICE", approve, channel=CHANNEL, message_ts=asked_again.ts, thread_ts=ts
    )
    await eventually(lambda: any("shipped 42" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert SHIPMENTS == [{"order": "42", "price": 9, "key": "ship_order:ship:42"}]
    assert standin.ephemerals == []
