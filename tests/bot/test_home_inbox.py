"""The App Home tab as an approval inbox: what the person may answer, across threads, with the
thread buttons' own value and path; refreshed when a request appears or goes; empty for someone
who may answer nothing, never someone else's."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from bot.slack.approval_blocks import ApprovalRef
from bot.slack.home import EMPTY
from bot.slack.inbound import session_key
from tests.bot.agents import AGENT, BOSS, POLICY, REFUND, model
from tests.bot.harness import approval, eventually, idle, replies

CHANNEL = "C0HOME"
OTHER = "C0HOM2"
pytestmark = pytest.mark.usefixtures("serving")


def texts(standin, user) -> str:
    view = standin.home_views.get(user)
    return "" if view is None else standin.render_view(view)


def home_buttons(standin, user):
    """Every (approve, deny) pair in the user's Home tab."""
    view = standin.home_views.get(user)
    blocks = view.body["blocks"] if view is not None else []
    return [tuple(b["elements"]) for b in blocks if b["type"] == "actions"]


async def parked(app, standin, who="U0ALICE", channel=CHANNEL, text="refund order 42"):
    ts = await app.slack.mention(who, text, channel=channel)
    await eventually(lambda: approval(standin, channel))
    await eventually(lambda: idle(standin, channel))
    return ts


async def test_the_inbox_lists_the_request_and_approve_there_resumes_the_turn(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await parked(app, standin)
    assert (await app.slack.open_home("U0ALICE")).status_code == 200
    await eventually(lambda: "Approve a $18.50 refund" in texts(standin, "U0ALICE"))
    shown = texts(standin, "U0ALICE")
    assert "Asked by <@U0ALICE>" in shown
    assert f"https://demo.slack.com/archives/{CHANNEL}/p{ts.replace('.', '')}" in shown
    ((approve, _),) = home_buttons(standin, "U0ALICE")
    # the same value the thread's button carries
    (thread_approve, _) = next(
        b for b in approval(standin, CHANNEL).blocks if b["type"] == "actions"
    )["elements"]
    assert ApprovalRef.decode(approve["value"]) == ApprovalRef.decode(thread_approve["value"])

    assert (await app.slack.click_in_home("U0ALICE", approve)).status_code == 200
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))
    message = approval(standin, CHANNEL) or next(
        m for m in standin.bot_messages(CHANNEL) if "Approve a $18.50" in m.text
    )
    await eventually(lambda: "Approved by <@U0ALICE>" in message.text)
    # the request went from the inbox; the turn is among her recent conversations
    await eventually(lambda: EMPTY in texts(standin, "U0ALICE"))
    assert "refund order 42" in texts(standin, "U0ALICE")
    # and, once it has ended, as ended: the tab open all along is not left saying "queued"
    await eventually(lambda: "refund order 42 · completed" in texts(standin, "U0ALICE"))
    assert standin.ephemerals == []


async def test_someone_who_may_answer_nothing_sees_an_empty_inbox(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    await parked(app, standin)
    await app.slack.open_home("U0BOB")
    await eventually(lambda: "U0BOB" in standin.home_views)
    assert EMPTY in texts(standin, "U0BOB")
    assert "refund" not in texts(standin, "U0BOB").lower()
    assert home_buttons(standin, "U0BOB") == []


async def test_a_home_click_by_the_wrong_person_or_workspace_changes_nothing(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await parked(app, standin)
    await app.slack.open_home("U0ALICE")
    await eventually(lambda: home_buttons(standin, "U0ALICE"))
    ((approve, _),) = home_buttons(standin, "U0ALICE")
    await app.slack.open_home("U0BOB")
    await eventually(lambda: "U0BOB" in standin.home_views)

    # bob's client sends alice's button (a forged view); alice from another workspace
    standin.home_views["U0BOB"].body["blocks"].append({"type": "actions", "elements": [approve]})
    await app.slack.click_in_home("U0BOB", approve)
    await eventually(lambda: "can't answer" in texts(standin, "U0BOB"))
    await app.slack.click_in_home("U0ALICE", approve, team_id="T0OTHER")
    await eventually(lambda: "can't answer" in texts(standin, "U0ALICE"))
    session = app.session(session_key("T0DEMO", CHANNEL, ts))
    assert [r.id for r in await session.pending()] == ["approve-refund"]
    assert any(b["type"] == "actions" for b in approval(standin, CHANNEL).blocks)

    unsigned = urlencode({"payload": json.dumps(app.slack.home_click_payload("U0ALICE", approve))})
    response = await app.slack.send(
        unsigned, content_type="application/x-www-form-urlencoded", secret="wrong"
    )
    assert response.status_code == 401


async def test_the_inbox_refreshes_when_a_request_appears_and_goes(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    await app.slack.open_home("U0ALICE")  # before anything waits
    await eventually(lambda: EMPTY in texts(standin, "U0ALICE"))
    first = await parked(app, standin)
    await eventually(lambda: "Approve a $18.50 refund" in texts(standin, "U0ALICE"))

    await app.slack.stop("U0ALICE", channel=CHANNEL, thread_ts=first)
    await eventually(lambda: EMPTY in texts(standin, "U0ALICE"))


async def test_a_policy_request_is_in_the_inbox_of_whom_the_policy_lets_answer(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(POLICY))
    await app.slack.open_home(BOSS)
    await app.slack.open_home("U0ALICE")
    await eventually(lambda: BOSS in standin.home_views and "U0ALICE" in standin.home_views)
    ts = await parked(app, standin, text="escalate this")
    await eventually(lambda: "Manager approval needed" in texts(standin, BOSS))
    assert "Manager approval" not in texts(standin, "U0ALICE")  # the hook says only the boss

    ((_, deny),) = home_buttons(standin, BOSS)
    await app.slack.click_in_home(BOSS, deny)
    modal = await eventually(lambda: standin.modals)
    await app.slack.submit(BOSS, modal[-1].id, {"reason": {"text": "not this quarter"}})
    message = next(m for m in standin.bot_messages(CHANNEL) if "Manager approval" in m.text)
    await eventually(lambda: f"Denied by <@{BOSS}>: not this quarter" in message.text)
    await eventually(lambda: EMPTY in texts(standin, BOSS))
    key = session_key("T0DEMO", CHANNEL, ts)

    async def completed():
        turns = await app.turns(key)
        return turns[-1].status.value == "completed"

    await eventually(completed)
    said = [m for m in await app.session(key).transcript() if m.role == "tool"]
    assert "not this quarter" in str(said[-1].note)  # the model reads the reason
