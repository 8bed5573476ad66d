"""The "Reset this conversation" message shortcut: the slash command's reset, from a message's
menu, which also works inside a thread (where Slack runs no app's slash command).

Every test sends real signed `message_action` payloads to the bot over HTTP, on SQLite and
PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any
from urllib.parse import urlencode

from bot.slack.inbound import session_key
from bot.slack.resets import RESET_SHORTCUT
from bot.testing import SlackStandIn
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import Running, eventually, idle, replies, settled

CHANNEL = "C0SHORT"
OTHER_CHANNEL = "C0QUIET"


async def _conversation(app: Running, standin: SlackStandIn, text: str = "hello") -> str:
    """A thread with the bot, answered and idle; its root's ts."""
    before = len(replies(standin, CHANNEL))
    ts = await app.slack.mention("U0ALICE", text, channel=CHANNEL)
    await eventually(lambda: len(replies(standin, CHANNEL)) > before and idle(standin, CHANNEL))
    return ts


def _said(standin: SlackStandIn, token: str) -> dict[str, Any] | None:
    return next((r for r in standin.responses if r["token"] == token), None)


async def test_the_shortcut_on_a_reply_resets_its_thread_and_says_which(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await _conversation(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    assert await app.session(key).transcript()
    reply = replies(standin, CHANNEL)[0]
    assert reply.thread_ts == ts

    started = time.monotonic()
    response = await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=reply.ts,
        response_url=standin.response_url("s1"),
    )
    assert response.status_code == 200
    assert time.monotonic() - started < 3  # Slack shows an error past three seconds
    said = await eventually(lambda: _said(standin, "s1"))
    assert said["response_type"] == "ephemeral"
    assert ts in said["text"]  # which thread
    assert f"`{key}#g0`" in said["text"]
    assert "archived" in said["text"]
    assert await app.session(key).transcript() == []


async def test_the_shortcut_on_a_threads_first_message_resets_that_thread(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    first = await _conversation(app, standin, "first")
    second = await _conversation(app, standin, "second")
    await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=first,
        response_url=standin.response_url("s2"),
    )
    said = await eventually(lambda: _said(standin, "s2"))
    assert first in said["text"]
    assert await app.session(session_key("T0DEMO", CHANNEL, first)).transcript() == []
    # not the channel's latest conversation: the one the message belongs to
    assert await app.session(session_key("T0DEMO", CHANNEL, second)).transcript()


async def test_the_shortcut_on_a_message_outside_any_thread_resets_the_latest_conversation(
    db_url, launch, standin
):
    """What the slash command does in a channel without a thread named."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    older = await _conversation(app, standin, "older")
    latest = await _conversation(app, standin, "latest")
    plain = app.slack.new_ts()
    standin.add_user_message(CHANNEL, plain, "U0BOB", "lunch at noon?")

    await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=plain,
        response_url=standin.response_url("s3"),
    )
    said = await eventually(lambda: _said(standin, "s3"))
    assert latest in said["text"]
    assert await app.session(session_key("T0DEMO", CHANNEL, latest)).transcript() == []
    assert await app.session(session_key("T0DEMO", CHANNEL, older)).transcript()


async def test_a_thread_without_the_bot_is_not_a_conversation_to_reset(db_url, launch, standin):
    """A message in someone else's thread names that thread; the channel's latest conversation
    is not reset in its place."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    ours = await _conversation(app, standin)
    root, reply = app.slack.new_ts(), app.slack.new_ts()
    standin.add_user_message(CHANNEL, root, "U0BOB", "team lunch thread")
    standin.add_user_message(CHANNEL, reply, "U0CAROL", "count me in", root)

    await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=reply,
        response_url=standin.response_url("s4"),
    )
    said = await eventually(lambda: _said(standin, "s4"))
    assert "no conversation with me" in said["text"]
    assert said["response_type"] == "ephemeral"
    assert await app.session(session_key("T0DEMO", CHANNEL, ours)).transcript()

    # and a channel where the bot never spoke
    quiet = app.slack.new_ts()
    standin.add_user_message(OTHER_CHANNEL, quiet, "U0BOB", "hi all")
    await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=OTHER_CHANNEL,
        message_ts=quiet,
        response_url=standin.response_url("s5"),
    )
    said = await eventually(lambda: _said(standin, "s5"))
    assert "no conversation with me" in said["text"]


async def test_a_person_of_another_workspace_cannot_reset(db_url, launch, standin):
    """A user id names a person only within their own workspace (as for Approve / Deny): in a
    channel shared with another workspace, its people are told so and nothing is reset."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await _conversation(app, standin)
    key = session_key("T0DEMO", CHANNEL, ts)
    reply = replies(standin, CHANNEL)[0]

    await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=reply.ts,
        user_team_id="T0OTHER",
        response_url=standin.response_url("s6"),
    )
    said = await eventually(lambda: _said(standin, "s6"))
    assert "another workspace" in said["text"]
    assert "Nothing was reset" in said["text"]
    assert await app.session(key).transcript()

    # the whole request from another workspace: its conversations are not this one
    await app.slack.message_shortcut(
        "U0ALICE",
        RESET_SHORTCUT,
        channel=CHANNEL,
        message_ts=reply.ts,
        team_id="T0OTHER",
        user_team_id="T0OTHER",
        response_url=standin.response_url("s7"),
    )
    said = await eventually(lambda: _said(standin, "s7"))
    assert "no conversation with me" in said["text"]
    assert await app.session(key).transcript()
    assert [t.cancel_reason for t in await app.turns(key)] == [None]


async def test_without_a_response_url_the_answer_is_an_ephemeral_in_the_thread(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await _conversation(app, standin)
    reply = replies(standin, CHANNEL)[0]
    response = await app.slack.message_shortcut(
        "U0ALICE", RESET_SHORTCUT, channel=CHANNEL, message_ts=reply.ts, response_url=None
    )
    assert response.status_code == 200
    said = await eventually(lambda: standin.ephemerals)
    assert said[0]["channel"] == CHANNEL
    assert said[0]["user"] == "U0ALICE"
    assert said[0]["thread_ts"] == ts
    assert ts in said[0]["text"]
    assert await app.session(session_key("T0DEMO", CHANNEL, ts)).transcript() == []


async def test_a_shortcut_payload_of_a_shape_slack_never_sends_changes_nothing(
    db_url, launch, standin
):
    """Signed but unreadable (`bot.slack.payload_shape`): a 200 that does nothing, never a 5xx that
    Slack would send again."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await _conversation(app, standin)
    reply = replies(standin, CHANNEL)[0]
    good = app.slack.message_shortcut_payload(
        "U0ALICE", RESET_SHORTCUT, channel=CHANNEL, message_ts=reply.ts
    )
    tasks = asyncio.all_tasks()
    for broken in (
        {**good, "message": "not an object"},
        {**good, "message": {"type": "message"}},
        {**good, "channel": None},
        {**good, "message": {**good["message"], "thread_ts": 17}},
        {**good, "response_url": ["x"]},
    ):
        body = urlencode({"payload": json.dumps(broken)})
        response = await app.slack.send(body, content_type="application/x-www-form-urlencoded")
        assert response.status_code == 200
    await settled(tasks)
    assert not standin.responses
    assert not standin.ephemerals
    assert await app.session(session_key("T0DEMO", CHANNEL, ts)).transcript()
