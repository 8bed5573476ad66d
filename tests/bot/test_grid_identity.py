"""A person of an Enterprise Grid workspace is the same person on every surface: Slack sends
their org in `team.enterprise_id` (with `enterprise` null) and the org's `E…` id as their
`user.team_id`, and they still answer their own approval in the thread, in the Deny modal and
from the Home tab, leave feedback and reset their conversation. In a channel shared between
workspaces the turn belongs to the installation's workspace and a guest of another one is not
taken for a member. Real signed requests, both databases, both serving modes."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import pytest

from bot.slack.inbound import session_key
from bot.slack.resets import RESET_SHORTCUT
from tests.bot.agents import AGENT, REFUND, model
from tests.bot.harness import (
    Running,
    approval,
    buttons,
    eventually,
    feedback_buttons,
    idle,
    replies,
)

CHANNEL = "C0GRID"
ORG = "E0ORG"
ALICE = "W0ALICE"
"""Grid user ids start with W."""
pytestmark = pytest.mark.usefixtures("serving")


def grid(payload: dict[str, Any]) -> dict[str, Any]:
    """An interaction as Slack sends it from a workspace of the org (block_actions,
    view_submission, message_action): the org on `team`, the org's id as the user's team."""
    payload["team"] = {**payload["team"], "enterprise_id": ORG, "enterprise_name": "Demo Org"}
    payload["user"] = {**payload["user"], "team_id": ORG}
    if payload.get("type") != "message_action":
        payload["enterprise"] = None
    return payload


async def send(app: Running, payload: dict[str, Any]) -> None:
    body = urlencode({"payload": json.dumps(payload)})
    response = await app.slack.send(body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 200


async def parked(app: Running, standin: Any) -> tuple[str, Any]:
    app.slack.enterprise_id = ORG  # events name the org (envelope and authorizations)
    ts = await app.slack.mention(ALICE, "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    return ts, message


async def test_a_grid_person_denies_their_own_request_with_a_reason(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    _, deny = buttons(message)

    click = app.slack.click_payload(
        ALICE, deny, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
    )
    await send(app, grid(click))
    (modal,) = await eventually(lambda: standin.modals)
    submission = app.slack.submission_payload(ALICE, modal.id, {"reason": {"text": "wrong one"}})
    await send(app, grid(submission))

    await eventually(lambda: f"Denied by <@{ALICE}>: wrong one" in message.text)
    assert standin.ephemerals == []
    await eventually(lambda: any("Refund done." in m.text for m in replies(standin, CHANNEL)))


async def test_a_grid_person_approves_from_home_then_rates_and_resets(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts, message = await parked(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    assert (await app.slack.open_home(ALICE)).status_code == 200
    await eventually(lambda: ALICE in standin.home_views and _home_buttons(standin))
    approve, _ = _home_buttons(standin)[0]

    await send(app, grid(app.slack.home_click_payload(ALICE, approve)))
    await eventually(lambda: f"Approved by <@{ALICE}>" in message.text)
    answer = await eventually(
        lambda: next((m for m in replies(standin, CHANNEL) if feedback_buttons(m)), None)
    )
    assert "Refund done." in answer.text
    assert standin.ephemerals == []

    element = feedback_buttons(answer)
    rating = app.slack.feedback_payload(
        ALICE, element, True, channel=CHANNEL, message_ts=answer.ts, thread_ts=ts
    )
    await send(app, grid(rating))
    rows = await app.bot.delivery.feedback()
    assert [(r.user_id, r.team, r.value) for r in rows] == [(ALICE, "T0DEMO", "positive")]

    await eventually(lambda: idle(standin, CHANNEL))
    shortcut = app.slack.message_shortcut_payload(
        ALICE,
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=answer.ts,
        response_url=standin.response_url("grid-reset"),
    )
    await send(app, grid(shortcut))
    said = await eventually(
        lambda: next((r for r in standin.responses if r["token"] == "grid-reset"), None)
    )
    assert "Reset done" in said["text"], said["text"]
    assert await app.session(key).transcript() == []


def _home_buttons(standin: Any) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    view = standin.home_views.get(ALICE)
    blocks = view.body["blocks"] if view is not None else []
    return [tuple(b["elements"]) for b in blocks if b["type"] == "actions"]


async def test_in_a_shared_channel_the_turn_is_the_installations_and_a_guest_is_a_guest(
    db_url, launch, standin
):
    """A Slack Connect delivery names the author's workspace in its envelope and the
    installation's in `authorizations` (bolt-python's fixtures show the shape)."""
    app = await launch(db_url, AGENT, model(REFUND))
    ts = app.slack.new_ts()
    standin.add_user_message(CHANNEL, ts, "U0GUEST", "<@U0BOT> refund order 42", None)
    event = app.slack.mention_event("U0GUEST", "refund order 42", channel=CHANNEL, ts=ts)
    event.update(team="T0EXT", user_team="T0EXT", source_team="T0EXT")
    envelope = app.slack.envelope(event)
    envelope.update(
        team_id="T0EXT",
        context_team_id="T0DEMO",
        context_enterprise_id=None,
        is_ext_shared_channel=True,
    )
    response = await app.slack.send(json.dumps(envelope), content_type="application/json")
    assert response.status_code == 200

    key = session_key("T0DEMO", CHANNEL, ts)
    message = await eventually(lambda: approval(standin, CHANNEL))
    assert [t.turn_id for t in await app.turns(key)] == [f"T0DEMO:{CHANNEL}:{ts}"]
    approve, _ = buttons(message)
    await app.slack.click(
        "U0GUEST", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts, team_id="T0EXT"
    )
    await eventually(lambda: standin.ephemerals)
    assert standin.ephemerals[0]["text"] == (
        "You can't answer this request: it belongs to another workspace, and only people "
        "there can answer it."
    )
    assert await app.session(key).pending() != []
