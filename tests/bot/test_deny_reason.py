"""Deny asks why: the click opens a modal (with its trigger, within Slack's three seconds), and
its submission denies through the click's own path with the reason, which the thread shows and
the model reads. A submission by anyone else, or with metadata this app did not seal, changes
nothing; a person who may not answer is refused at the click, as before."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

import pytest

from bot.slack.inbound import session_key
from bot.testing.agent_surfaces import TRIGGER_LIFETIME
from bot.testing.workspace import Trigger
from tests.bot.agents import AGENT, REFUND, model
from tests.bot.harness import approval, buttons, eventually, idle, replies

CHANNEL = "C0DENY"
pytestmark = pytest.mark.usefixtures("serving")


async def parked(app, standin):
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    return ts, message


async def deny_clicked(app, standin, ts, message, who="U0ALICE"):
    _, deny = buttons(message)
    response = await app.slack.click(
        who, deny, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
    )
    assert response.status_code == 200


async def test_deny_opens_a_modal_and_its_reason_reaches_thread_and_model(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    await deny_clicked(app, standin, ts, message)
    (modal,) = await eventually(lambda: standin.modals)
    assert modal.user == "U0ALICE"
    assert "Approve a $18.50 refund" in json.dumps(modal.body["blocks"])
    assert await app.session(key).pending() != []  # nothing answered yet

    response = await app.slack.submit("U0ALICE", modal.id, {"reason": {"text": "wrong order"}})
    assert response.status_code == 200
    await eventually(lambda: "Denied by <@U0ALICE>: wrong order" in message.text)
    assert not any(b["type"] == "actions" for b in message.blocks)
    await eventually(lambda: len(replies(standin, CHANNEL)) == 2)
    tool = [m for m in await app.session(key).transcript() if m.role == "tool"]
    assert "wrong order" in (tool[-1].note or "")
    assert standin.ephemerals == []


async def test_a_submission_by_another_person_or_with_forged_metadata_changes_nothing(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    await deny_clicked(app, standin, ts, message)
    (modal,) = await eventually(lambda: standin.modals)

    assert (await app.slack.submit("U0BOB", modal.id, {"reason": {"text": "x"}})).status_code == 200
    sealed = modal.body["private_metadata"]
    body, _, mac = sealed.rpartition(".")
    modal.body["private_metadata"] = f"{body}.{'0' * len(mac)}"
    await app.slack.submit("U0ALICE", modal.id, {"reason": {"text": "x"}})
    modal.body["private_metadata"] = sealed
    payload = app.slack.submission_payload("U0ALICE", modal.id, {"reason": {"text": "x"}})
    unsigned = urlencode({"payload": json.dumps(payload)})
    forged = await app.slack.send(
        unsigned, content_type="application/x-www-form-urlencoded", secret="wrong"
    )
    assert forged.status_code == 401

    assert [r.id for r in await app.session(key).pending()] == ["approve-refund"]
    assert any(b["type"] == "actions" for b in message.blocks)
    # the person who clicked still can
    await app.slack.submit("U0ALICE", modal.id, {"reason": {"text": "no"}})
    await eventually(lambda: "Denied by <@U0ALICE>: no" in message.text)


async def test_someone_not_allowed_is_refused_at_the_click_with_no_modal(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    await deny_clicked(app, standin, ts, message, who="U0MALLORY")
    await eventually(lambda: standin.ephemerals)
    assert "can't answer" in standin.ephemerals[0]["text"]
    assert standin.modals == []
    assert any(b["type"] == "actions" for b in message.blocks)


async def test_a_trigger_too_old_for_the_modal_denies_at_once(db_url, launch, standin):
    """Slack's three seconds passed before the bot could open the modal (a slow machine): the
    person asked to deny, so it denies, without a reason, rather than leave the click unheard."""
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    standin.trigger_lifetime = TRIGGER_LIFETIME

    def stale(trigger_id: str, user: str) -> None:
        standin.triggers[trigger_id] = Trigger(id=trigger_id, user=user, issued_at=time.time() - 10)

    standin.issue_trigger = stale  # type: ignore[method-assign]
    await deny_clicked(app, standin, ts, message)
    await eventually(lambda: "Denied by <@U0ALICE>" in message.text)
    assert standin.calls_to("views.open")[-1].response["error"] == "expired_trigger_id"
    assert standin.modals == []
