"""Events → attested turns, over real HTTP against the stand-in."""

from __future__ import annotations

import json
import time

from bot.slack.inbound import session_key
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import SECRET, eventually, idle, replies

CHANNEL = "C0TEST"


async def test_signed_mention_runs_one_turn_and_streams_the_reply(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await app.slack.mention("U0ALICE", "hello?", channel=CHANNEL)
    key = session_key("T0DEMO", CHANNEL, ts)

    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    turns = await app.turns(key)
    assert [(t.turn_id, t.status.value) for t in turns] == [(f"T0DEMO:{CHANNEL}:{ts}", "completed")]
    inbound = turns[0].input.inbound
    assert inbound.user.id == "U0ALICE"
    assert inbound.user.attested is True
    assert inbound.raw is None  # the raw event never reaches a checkpoint
    [reply] = replies(standin, CHANNEL)
    assert reply.thread_ts == ts
    assert reply.text == "Hello from the agent."
    assert standin.calls_to("chat.startStream")
    assert standin.calls_to("chat.stopStream")
    assert not standin.calls_to("chat.postMessage")


async def test_retries_and_the_twin_message_event_are_one_turn_across_a_restart(
    db_url, launch, standin
):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = app.slack.new_ts()
    mention = app.slack.mention_event("U0ALICE", "hi", channel=CHANNEL, ts=ts)
    twin = app.slack.message_event("U0ALICE", mention["text"], channel=CHANNEL, ts=ts)
    for response in [
        await app.slack.post_event(mention),
        await app.slack.post_event(twin),
        await app.slack.post_event(mention, retry_num=1),
    ]:
        assert response.status_code == 200
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    await app.stop()

    again = await launch(db_url, AGENT, model(SIMPLE))
    assert (await again.slack.post_event(mention, retry_num=2)).status_code == 200
    assert (await again.slack.post_event(twin, retry_num=3)).status_code == 200
    key = session_key("T0DEMO", CHANNEL, ts)
    assert len(await again.turns(key)) == 1
    assert [m.text for m in replies(standin, CHANNEL)] == ["Hello from the agent."]


async def test_bad_signature_or_stale_timestamp_is_401_and_stores_nothing(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = app.slack.new_ts()
    event = app.slack.mention_event("U0ALICE", "hi", channel=CHANNEL, ts=ts)
    forged = await app.slack.post_event(event, secret="not-the-secret")
    stale = await app.slack.post_event(event, timestamp=int(time.time()) - 600)
    assert forged.status_code == 401
    assert stale.status_code == 401
    key = session_key("T0DEMO", CHANNEL, ts)
    assert await app.turns(key) == []
    assert await app.bot.delivery.get_target(key) is None

    malformed = await app.slack.send("{not json", content_type="application/json")
    assert malformed.status_code == 400
    payload = await app.slack.send(
        "payload=%7Bnope", content_type="application/x-www-form-urlencoded"
    )
    assert payload.status_code == 400
    assert SECRET not in forged.text


async def test_bots_edits_and_deletions_start_no_turn(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await app.slack.mention("U0ALICE", "hi", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    key = session_key("T0DEMO", CHANNEL, ts)
    others = [
        app.slack.message_event(
            None,
            "beep",
            channel=CHANNEL,
            ts=app.slack.new_ts(),
            thread_ts=ts,
            bot_id="B0OTHER",
            subtype="bot_message",
        ),
        app.slack.message_event(
            "U0BOT", "my own words", channel=CHANNEL, ts=app.slack.new_ts(), thread_ts=ts
        ),
        app.slack.message_event(
            None,
            "",
            channel=CHANNEL,
            ts=app.slack.new_ts(),
            thread_ts=ts,
            subtype="message_changed",
            message={"user": "U0ALICE", "text": "edited", "ts": ts},
        ),
        app.slack.message_event(
            None,
            "",
            channel=CHANNEL,
            ts=app.slack.new_ts(),
            thread_ts=ts,
            subtype="message_deleted",
            deleted_ts=ts,
        ),
        # not in a thread the bot is part of, and no mention
        app.slack.message_event("U0ALICE", "chatter", channel=CHANNEL, ts=app.slack.new_ts()),
        {
            "type": "reaction_added",
            "user": "U0ALICE",
            "reaction": "+1",
            "item": {"type": "message", "channel": CHANNEL, "ts": ts},
        },
    ]
    for event in others:
        assert (await app.slack.post_event(event)).status_code == 200
    assert len(await app.turns(key)) == 1
    assert len(replies(standin, CHANNEL)) == 1


async def test_follow_up_in_the_thread_and_direct_messages_start_turns(db_url, launch, standin):
    app = await launch(db_url, AGENT, model(SIMPLE), REPLACE_IN_FLIGHT=False)
    ts = await app.slack.mention("U0ALICE", "hi", channel=CHANNEL)
    await eventually(lambda: replies(standin, CHANNEL) and idle(standin, CHANNEL))
    await app.slack.reply("U0ALICE", "and another thing", channel=CHANNEL, thread_ts=ts)
    await eventually(lambda: len(replies(standin, CHANNEL)) == 2 and idle(standin, CHANNEL))
    assert len(await app.turns(session_key("T0DEMO", CHANNEL, ts))) == 2

    dm_ts = app.slack.new_ts()
    event = app.slack.message_event(
        "U0ALICE", "hello in private", channel="D0ALICE", ts=dm_ts, channel_type="im"
    )
    assert (await app.slack.post_event(event)).status_code == 200
    await eventually(lambda: replies(standin, "D0ALICE") and idle(standin, "D0ALICE"))
    # the thread status shows progress, in the channel thread (chat:write allows it there) and in
    # the DM, and is cleared once each reply is done (just after the stream stops: wait for it)
    for channel in (CHANNEL, "D0ALICE"):
        statuses = [s["status"] for s in standin.statuses if s["channel_id"] == channel]
        assert statuses
        assert statuses[0]
        await eventually(
            lambda ch=channel: (
                [s for s in standin.statuses if s["channel_id"] == ch][-1]["status"] == ""
            ),
            what=f"status cleared in {channel}",
        )
    assert json.dumps(standin.statuses[-1]["status"]) == '""'
