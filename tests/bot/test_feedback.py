"""👍 / 👎 under a final answer: a click is stored durably (the person's last click on an answer
wins) and exported by `bot feedback`; a click from another workspace, or a value that is not
the clicked message's, stores nothing."""

from __future__ import annotations

import csv
import io
import json

import pytest

from bot.cli import main as cli
from bot.cli.ops import feedback_command
from bot.slack.inbound import session_key, turn_id_for
from tests.bot.agents import AGENT, REFUND, SIMPLE, model
from tests.bot.harness import approval, buttons, eventually, feedback_buttons, idle, replies

CHANNEL = "C0FEED"
pytestmark = pytest.mark.usefixtures("serving")


async def answered(app, standin, script=SIMPLE):
    ts = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    reply = await eventually(
        lambda: next((m for m in replies(standin, CHANNEL) if feedback_buttons(m)), None)
    )
    await eventually(lambda: idle(standin, CHANNEL))
    return ts, reply


async def click(app, element, positive, reply, ts, user="U0ALICE", **kwargs):
    response = await app.slack.feedback(
        user, element, positive, channel=CHANNEL, message_ts=reply.ts, thread_ts=ts, **kwargs
    )
    assert response.status_code == 200


async def test_a_final_answer_carries_the_buttons_and_a_click_is_stored(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts, reply = await answered(app, standin)
    assert reply.text == "Hello from the agent."
    element = feedback_buttons(reply)
    assert element is not None
    stop = standin.calls_to("chat.stopStream")[-1]
    assert stop.args["blocks"][0]["type"] == "context_actions"

    await click(app, element, True, reply, ts)
    rows = await app.bot.delivery.feedback()
    assert [(r.user_id, r.team, r.value) for r in rows] == [("U0ALICE", "T0DEMO", "positive")]
    assert rows[0].session_key == session_key("T0DEMO", CHANNEL, ts)
    assert rows[0].turn_id == turn_id_for("T0DEMO", CHANNEL, ts)

    # the buttons toggle: the same person's later click replaces the first
    await click(app, element, False, reply, ts)
    await click(app, element, True, reply, ts, user="U0BOB")
    rows = await app.bot.delivery.feedback()
    assert sorted((r.user_id, r.value) for r in rows) == [
        ("U0ALICE", "negative"),
        ("U0BOB", "positive"),
    ]


async def test_an_approval_turns_answer_gets_them_and_its_request_does_not(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL))
    await eventually(lambda: idle(standin, CHANNEL))
    first = next(m for m in replies(standin, CHANNEL))
    assert feedback_buttons(first) is None  # the words before the park are not an answer yet
    approve, _ = buttons(message)
    await app.slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts)
    final = await eventually(
        lambda: next((m for m in replies(standin, CHANNEL) if "Refund done." in m.text), None)
    )
    await eventually(lambda: feedback_buttons(final))
    assert feedback_buttons(message) is None


async def test_a_click_from_another_workspace_or_on_another_message_stores_nothing(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE * 2))
    ts, reply = await answered(app, standin)
    element = feedback_buttons(reply)
    assert element is not None
    await click(app, element, True, reply, ts, team_id="T0OTHER")

    # a value naming this answer, clicked on another message of the bot's
    other = await app.slack.mention("U0ALICE", "again", channel=CHANNEL)
    await eventually(
        lambda: len([m for m in replies(standin, CHANNEL) if feedback_buttons(m)]) == 2
    )
    second = next(m for m in replies(standin, CHANNEL) if m.thread_ts == other)
    await click(app, element, True, second, other)
    # and a value that is not JSON at all
    forged = {**element, "positive_button": {**element["positive_button"], "value": "{oops"}}
    await click(app, forged, True, reply, ts)
    assert await app.bot.delivery.feedback() == []


async def test_an_unsigned_feedback_click_is_refused(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts, reply = await answered(app, standin)
    element = feedback_buttons(reply)
    assert element is not None
    payload = app.slack.feedback_payload(
        "U0ALICE", element, True, channel=CHANNEL, message_ts=reply.ts, thread_ts=ts
    )
    from urllib.parse import urlencode

    body = urlencode({"payload": json.dumps(payload)})
    response = await app.slack.send(
        body, content_type="application/x-www-form-urlencoded", secret="not-the-secret"
    )
    assert response.status_code == 401
    assert await app.bot.delivery.feedback() == []


async def export(argv: list[str], url: str) -> int:
    """`bot feedback ...` as the command line parses and runs it (in this process, without the
    command's logging setup, which would stay installed for the tests after this one)."""
    return await feedback_command(cli._parser().parse_args(argv), url)


async def test_bot_feedback_exports_csv_and_json_lines(db_url, launch, standin, capsys):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts, reply = await answered(app, standin)
    element = feedback_buttons(reply)
    assert element is not None
    await click(app, element, False, reply, ts)
    capsys.readouterr()

    assert await export(["feedback", "--database-url", db_url], db_url) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["user"], r["team"], r["value"]) for r in rows] == [("U0ALICE", "T0DEMO", "negative")]
    assert rows[0]["turn_id"] == turn_id_for("T0DEMO", CHANNEL, ts)

    argv = ["feedback", "--database-url", db_url, "--format", "jsonl", "--since", "1h"]
    assert await export(argv, db_url) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["session"] == session_key("T0DEMO", CHANNEL, ts)

    argv = ["feedback", "--database-url", db_url, "--since", "2999-01-01"]
    assert await export(argv, db_url) == 0
    assert capsys.readouterr().out.splitlines() == ["clicked_at,team,user,session,turn_id,value"]
