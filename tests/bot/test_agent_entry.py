"""Where a conversation with the agent starts: a new assistant thread is greeted (once, however
often Slack delivers the event) and gets the agent's suggested prompts; the Messages tab gets
the prompts pinned to the DM."""

from __future__ import annotations

import json

from bot.slack.agent_entry import MESSAGES_TITLE, PROMPTS_TITLE
from tests.bot.agents import PROMPTED, SIMPLE, model
from tests.bot.harness import eventually, replies


async def test_a_new_assistant_thread_is_greeted_once_with_the_prompts(db_url, launch, standin):
    app = await launch(db_url, PROMPTED, model(SIMPLE))
    channel, thread_ts = await app.slack.start_assistant_thread("U0ALICE", viewing="C0ELSE")
    greeting = await eventually(lambda: replies(standin, channel))
    assert len(greeting) == 1
    assert greeting[0].thread_ts == thread_ts
    assert "<@U0ALICE>" in greeting[0].text
    await eventually(lambda: standin.suggested_prompts)
    (prompts,) = standin.suggested_prompts
    assert (prompts["channel_id"], prompts["thread_ts"]) == (channel, thread_ts)
    assert prompts["title"] == PROMPTS_TITLE
    assert (
        prompts["prompts"]
        == [{"title": p.title, "message": p.message} for p in PROMPTED.suggested_prompts][:4]
    )

    # Slack delivers the event again (a retry): no second greeting
    event = app.slack.thread_started_event("U0ALICE", channel=channel, thread_ts=thread_ts)
    assert (await app.slack.post_event(event, retry_num=1)).status_code == 200
    await eventually(lambda: len(standin.suggested_prompts) == 2)
    assert len(replies(standin, channel)) == 1

    # the person's first message in the thread is a turn as any DM message
    await app.slack.reply(
        "U0ALICE", "hello", channel=channel, thread_ts=thread_ts, channel_type="im"
    )
    await eventually(lambda: any("agent." in m.text for m in replies(standin, channel)))


async def test_the_messages_tab_gets_the_prompts(db_url, launch, standin):
    app = await launch(db_url, PROMPTED, model(SIMPLE))
    response = await app.slack.open_home("U0ALICE", tab="messages")
    assert response.status_code == 200
    await eventually(lambda: standin.suggested_prompts)
    (prompts,) = standin.suggested_prompts
    assert prompts["channel_id"] == app.slack.dm_channel("U0ALICE")
    assert "thread_ts" not in prompts  # pinned to the DM, not a thread
    assert prompts["title"] == MESSAGES_TITLE
    assert [p["title"] for p in prompts["prompts"]] == [p.title for p in PROMPTED.suggested_prompts]


async def test_an_unsigned_or_malformed_thread_start_does_nothing(db_url, launch, standin):
    app = await launch(db_url, PROMPTED, model(SIMPLE))
    event = app.slack.thread_started_event("U0ALICE", channel="D0ALICE", thread_ts="1.000001")
    body = json.dumps(app.slack.envelope(event))
    forged = await app.slack.send(body, content_type="application/json", secret="wrong")
    assert forged.status_code == 401
    event["assistant_thread"] = "not an object"
    assert (await app.slack.post_event(event)).status_code == 200
    await app.slack.open_home("U0ALICE", tab="messages")  # a later request is served
    await eventually(lambda: standin.suggested_prompts)
    assert replies(standin, "D0ALICE") == []
