"""Debounce (a newer message supersedes the unfinished reply) and the reset slash command."""

from __future__ import annotations

from urllib.parse import urlencode

from agent import ScriptedModel, ScriptedReply
from bot.slack.inbound import session_key
from tests.bot.agents import AGENT, REFUND, SIMPLE, model
from tests.bot.harness import approval, eventually, idle, replies

CHANNEL = "C0CTRL"

SLOW = ScriptedReply(text=[f"word{i} " for i in range(40)])
QUICK = ScriptedReply(text=["Answer ", "to the second."])


async def test_a_newer_message_supersedes_the_unfinished_reply(db_url, launch, standin):
    scripted = ScriptedModel(by_opening={"first": [SLOW], "second": [QUICK]}, delta_delay=0.1)
    app = await launch(db_url, AGENT, scripted)
    ts = await app.slack.mention("U0ALICE", "first", channel=CHANNEL)
    await eventually(lambda: any("word2" in m.text for m in replies(standin, CHANNEL)))

    await app.slack.reply("U0ALICE", "second", channel=CHANNEL, thread_ts=ts)
    await eventually(lambda: any("to the second" in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    first, second = replies(standin, CHANNEL)
    assert first.text.rstrip().endswith("superseded by a newer message_")
    assert "word39" not in first.text
    assert second.text == "Answer to the second."
    turns = await app.turns(session_key("T0DEMO", CHANNEL, ts))
    assert [(t.status.value, t.cancel_reason) for t in turns] == [
        ("cancelled", "replaced"),
        ("completed", None),
    ]


async def test_a_newer_message_never_cancels_a_parked_approval(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(REFUND))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    await eventually(lambda: approval(standin, CHANNEL))
    await app.slack.reply("U0ALICE", "are you there?", channel=CHANNEL, thread_ts=ts)
    # the park stands; the new message is told why it waits
    await eventually(
        lambda: any("waiting for an answer" in m.text for m in replies(standin, CHANNEL))
    )
    session = app.session(session_key("T0DEMO", CHANNEL, ts))
    assert [r.id for r in await session.pending()] == ["approve-refund"]


async def test_the_slash_command_resets_the_thread_and_says_what_was_archived(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    key = session_key("T0DEMO", CHANNEL, ts)

    response = await app.slack.command(
        "U0ALICE", "/agent-reset", ts, channel=CHANNEL, response_url=standin.response_url("r1")
    )
    assert response.status_code == 200
    assert "Resetting" in response.text
    said = await eventually(lambda: standin.responses)
    assert said[0]["token"] == "r1"
    assert f"`{key}#g0`" in said[0]["text"]
    assert "archived" in said[0]["text"]
    assert await app.session(key).transcript() == []

    # without an argument: the channel's most recent conversation
    await app.slack.command(
        "U0ALICE", "/agent-reset", "", channel=CHANNEL, response_url=standin.response_url("r2")
    )
    await eventually(lambda: len(standin.responses) == 2)
    assert f"`{key}#g1`" in standin.responses[1]["text"]


async def test_the_slash_command_takes_a_thread_link(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    first = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    second = await app.slack.mention("U0ALICE", "hello again", channel=CHANNEL)
    await eventually(lambda: len(replies(standin, CHANNEL)) == 2 and idle(standin, CHANNEL))

    link = f"https://demo.slack.com/archives/{CHANNEL}/p{first.replace('.', '')}"
    await app.slack.command(
        "U0ALICE", "/agent-reset", link, channel=CHANNEL, response_url=standin.response_url("r1")
    )
    said = await eventually(lambda: standin.responses)
    assert first in said[0]["text"]  # the reply says which thread it reset
    assert await app.session(session_key("T0DEMO", CHANNEL, first)).transcript() == []
    assert await app.session(session_key("T0DEMO", CHANNEL, second)).transcript()


async def test_the_slash_command_never_reads_a_thread_slack_does_not_send(db_url, launch, standin):
    """Slack runs no app's slash command inside a thread, so its request has no `thread_ts`:
    one that does is not Slack's to honour. Without a thread in the text, the reset is the
    channel's latest conversation, whatever else the form holds."""
    app = await launch(db_url, AGENT, model(SIMPLE))
    older = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    latest = await app.slack.mention("U0ALICE", "hello again", channel=CHANNEL)
    await eventually(lambda: len(replies(standin, CHANNEL)) == 2 and idle(standin, CHANNEL))

    form = app.slack.command_form(
        "U0ALICE", "/agent-reset", "", channel=CHANNEL, response_url=standin.response_url("r1")
    )
    form["thread_ts"] = older
    response = await app.slack.send(
        urlencode(form), content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    said = await eventually(lambda: standin.responses)
    assert latest in said[0]["text"]
    assert await app.session(session_key("T0DEMO", CHANNEL, latest)).transcript() == []
    assert await app.session(session_key("T0DEMO", CHANNEL, older)).transcript()
