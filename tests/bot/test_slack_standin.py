"""The Slack stand-in refuses what Slack refuses: if it quietly took more than Slack does, every
bot test would pass against a Slack that does not exist. Driven with the real `AsyncWebClient`
over HTTP, as the bot drives it."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing.agent_surfaces import TRIGGER_LIFETIME
from bot.testing.standin import SlackStandIn, sdk_arguments

CHANNEL = "C0TEST"


@pytest.fixture
def client(standin: SlackStandIn) -> AsyncWebClient:
    return AsyncWebClient(token="xoxb-test", base_url=standin.api_url)


async def refused(send: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await send
    return str(caught.value.response["error"])


def a_thread(standin: SlackStandIn, replies: int) -> str:
    parent = standin.next_ts()
    standin.add_user_message(CHANNEL, parent, "U0ALICE", "the question")
    for n in range(replies):
        standin.add_user_message(CHANNEL, standin.next_ts(), "U0ALICE", f"reply {n}", parent)
    return parent


async def test_an_argument_the_sdk_method_does_not_name_is_invalid_arguments(client, standin):
    parent = a_thread(standin, 0)
    code = await refused(
        client.chat_startStream(
            channel=CHANNEL,
            thread_ts=parent,
            recipient_user_id="U0ALICE",
            recipient_team_id="T0DEMO",
            metadata={"event_type": "agent_reply", "event_payload": {}},
        )
    )
    assert code == "invalid_arguments"
    assert standin.bot_messages(CHANNEL) == []
    # the same argument is fine where the method takes it
    posted = await client.chat_postMessage(
        channel=CHANNEL, text="hi", metadata={"event_type": "x", "event_payload": {}}
    )
    assert posted["ok"]


def test_the_accepted_arguments_are_read_from_the_installed_sdk():
    for method in ("chat.startStream", "chat.update", "conversations.replies", "chat.delete"):
        function = getattr(AsyncWebClient, method.replace(".", "_"))
        named = {
            p.name
            for p in inspect.signature(function).parameters.values()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        }
        assert sdk_arguments(method) == named
    assert "metadata" not in (sdk_arguments("chat.startStream") or set())
    assert sdk_arguments("chat.noSuchMethod") is None


async def test_conversations_replies_is_a_get_with_a_query_string_and_pages(client, standin):
    parent = a_thread(standin, 250)
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await client.conversations_replies(
            channel=CHANNEL, ts=parent, limit=1000, cursor=cursor
        )
        pages += 1
        seen += [m["text"] for m in page["messages"]]
        cursor = page["response_metadata"]["next_cursor"]
        if not page["has_more"]:
            assert cursor == ""
            break
    # at most `page_size` per page whatever the limit asks, parent first, oldest first
    assert pages == 3
    assert seen == ["the question"] + [f"reply {n}" for n in range(250)]
    [call] = standin.calls_to("conversations.replies")[:1]
    assert call.verb == "GET"  # the SDK reads with GET: the arguments came as a query string
    assert call.args["ts"] == parent

    small = await client.conversations_replies(channel=CHANNEL, ts=parent, limit=10)
    assert len(small["messages"]) == 10
    assert small["has_more"]
    later = await client.conversations_replies(
        channel=CHANNEL, ts=parent, oldest=small["messages"][-1]["ts"]
    )
    assert later["messages"][0]["text"] == "reply 9"
    assert (
        await refused(
            client.conversations_replies(channel=CHANNEL, ts=parent, cursor="bm90IGEgY3Vyc29y")
        )
        == "invalid_cursor"
    )


async def test_conversations_history_pages_newest_first(client, standin):
    for n in range(120):
        standin.add_user_message(CHANNEL, standin.next_ts(), "U0ALICE", f"top {n}")
    first = await client.conversations_history(channel=CHANNEL, limit=1000)
    assert len(first["messages"]) == 100
    assert first["has_more"]
    assert first["messages"][0]["text"] == "top 119"
    rest = await client.conversations_history(
        channel=CHANNEL, cursor=first["response_metadata"]["next_cursor"]
    )
    assert [m["text"] for m in rest["messages"]][-1] == "top 0"
    assert not rest["has_more"]


async def test_chat_update_without_blocks_keeps_what_the_message_shows(client, standin):
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "with blocks"}}]
    posted = await client.chat_postMessage(channel=CHANNEL, text="fallback", blocks=blocks)
    await client.chat_update(channel=CHANNEL, ts=posted["ts"], text="new text only")
    message = standin.find(CHANNEL, posted["ts"])
    assert message is not None
    assert message.blocks == blocks

    parent = a_thread(standin, 0)
    stream = await client.chat_startStream(
        channel=CHANNEL,
        thread_ts=parent,
        recipient_user_id="U0ALICE",
        recipient_team_id="T0DEMO",
        markdown_text="streamed words",
    )
    await client.chat_stopStream(channel=CHANNEL, ts=stream["ts"])
    await client.chat_update(channel=CHANNEL, ts=stream["ts"], text="edited")
    streamed = standin.find(CHANNEL, stream["ts"])
    assert streamed is not None
    assert streamed.text == "streamed words"
    await client.chat_update(channel=CHANNEL, ts=stream["ts"], markdown_text="**edited**")
    assert streamed.text == "**edited**"
    assert (
        await refused(
            client.chat_update(channel=CHANNEL, ts=stream["ts"], text="a", markdown_text="b")
        )
        == "markdown_text_conflict"
    )


async def test_streams_refuse_what_slack_refuses(client, standin):
    parent = a_thread(standin, 0)
    # streaming into a channel names its recipient
    assert (
        await refused(client.chat_startStream(channel=CHANNEL, thread_ts=parent))
        == "invalid_arguments"
    )
    stream = await client.chat_startStream(
        channel=CHANNEL, thread_ts=parent, recipient_user_id="U0ALICE", recipient_team_id="T0DEMO"
    )
    # an append with nothing in it
    assert (
        await refused(client.chat_appendStream(channel=CHANNEL, ts=stream["ts"], chunks=[]))
        == "invalid_arguments"
    )
    await client.chat_appendStream(channel=CHANNEL, ts=stream["ts"], markdown_text="ok")
    await client.chat_stopStream(
        channel=CHANNEL, ts=stream["ts"], metadata={"event_type": "x", "event_payload": {"k": 1}}
    )
    message = standin.find(CHANNEL, stream["ts"])
    assert message is not None
    assert message.text == "ok"
    assert message.metadata
    assert (
        await refused(client.chat_appendStream(channel=CHANNEL, ts=stream["ts"], markdown_text="x"))
        == "message_not_in_streaming_state"
    )


async def test_thread_status_is_accepted_in_channel_threads(client, standin):
    parent = a_thread(standin, 0)
    await client.assistant_threads_setStatus(channel_id=CHANNEL, thread_ts=parent, status="busy")
    assert standin.statuses[-1]["channel_id"] == CHANNEL


async def test_chat_delete_removes_only_the_bots_own_messages(client, standin):
    posted = await client.chat_postMessage(channel=CHANNEL, text="mine")
    await client.chat_delete(channel=CHANNEL, ts=posted["ts"])
    assert standin.find(CHANNEL, posted["ts"]) is None
    theirs = a_thread(standin, 0)
    assert await refused(client.chat_delete(channel=CHANNEL, ts=theirs)) == "cant_delete_message"
    assert await refused(client.chat_delete(channel=CHANNEL, ts=posted["ts"])) == (
        "message_not_found"
    )


# agent surfaces ----------------------------------------------------------------------------
# Each case cites the reference it holds the stand-in to (see bot/testing/agent_surfaces.py).


async def test_an_agent_session_takes_the_four_statuses_and_its_title_once(client, standin):
    """https://docs.slack.dev/reference/methods/agents.sessions.setStatus: status is one of
    active, processing, suspended, closed; the first call creates the session, and the title and
    initiator apply only then."""
    parent = a_thread(standin, 0)
    assert (
        await refused(
            client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=parent, status="busy")
        )
        == "invalid_arguments"
    )
    # thread-based sessions in channels and DMs need the thread
    assert (
        await refused(client.agents_sessions_setStatus(channel_id=CHANNEL, status="processing"))
        == "invalid_arguments"
    )
    assert (
        await refused(
            client.agents_sessions_setStatus(
                channel_id=CHANNEL, thread_ts=parent, status="processing", title="x" * 201
            )
        )
        == "invalid_arguments"
    )
    first = await client.agents_sessions_setStatus(
        channel_id=CHANNEL,
        thread_ts=parent,
        status="processing",
        title="Refund order 42",
        initiator_user_id="U0ALICE",
    )
    assert first["status"] == "processing"
    await client.agents_sessions_setStatus(
        channel_id=CHANNEL, thread_ts=parent, status="active", title="ignored"
    )
    session = standin.session_of(CHANNEL, parent)
    assert session is not None
    assert (session.title, session.initiator, session.history) == (
        "Refund order 42",
        "U0ALICE",
        ["processing", "active"],
    )
    assert (
        await refused(
            client.agents_sessions_setStatus(
                channel_id=CHANNEL, thread_ts="1.000001", status="active"
            )
        )
        == "thread_not_found"
    )


async def test_a_session_status_warns_while_the_app_does_not_subscribe_to_stop():
    """https://docs.slack.dev/reference/events/agent_session_stopped: while the app is not
    subscribed, setStatus answers with the missing_agent_session_stopped_event_subscription
    warning (and the user sees no Stop button)."""
    async with SlackStandIn(events=frozenset({"app_mention"})) as unsubscribed:
        parent = a_thread(unsubscribed, 0)
        client = AsyncWebClient(token="xoxb-test", base_url=unsubscribed.api_url)
        answer = await client.agents_sessions_setStatus(
            channel_id=CHANNEL, thread_ts=parent, status="processing"
        )
    assert answer["response_metadata"]["warnings"] == [
        "missing_agent_session_stopped_event_subscription"
    ]


async def test_an_app_not_declared_an_agent_keeps_no_session():
    async with SlackStandIn(agent_app=False) as plain:
        parent = a_thread(plain, 0)
        client = AsyncWebClient(token="xoxb-test", base_url=plain.api_url)
        code = await refused(
            client.agents_sessions_setStatus(channel_id=CHANNEL, thread_ts=parent, status="active")
        )
    assert code == "not_allowed"
    assert plain.sessions == {}


async def test_stop_stream_sets_only_a_session_status_slack_knows(client, standin):
    parent = a_thread(standin, 0)
    stream = await client.chat_startStream(
        channel=CHANNEL, thread_ts=parent, recipient_user_id="U0ALICE", recipient_team_id="T0DEMO"
    )
    assert (
        await refused(
            client.chat_stopStream(channel=CHANNEL, ts=stream["ts"], session_status="done")
        )
        == "invalid_arguments"
    )
    message = standin.find(CHANNEL, stream["ts"])
    assert message is not None
    assert message.streaming
    await client.chat_stopStream(channel=CHANNEL, ts=stream["ts"], session_status="active")
    session = standin.session_of(CHANNEL, parent)
    assert session is not None
    assert session.status == "active"


async def test_thread_status_takes_at_most_ten_loading_messages(client, standin):
    """https://docs.slack.dev/reference/methods/assistant.threads.setStatus: "Maximum of 10"."""
    parent = a_thread(standin, 0)
    many = [f"step {n}" for n in range(11)]
    assert (
        await refused(
            client.assistant_threads_setStatus(
                channel_id=CHANNEL, thread_ts=parent, status="busy", loading_messages=many
            )
        )
        == "invalid_arguments"
    )
    await client.assistant_threads_setStatus(
        channel_id=CHANNEL, thread_ts=parent, status="busy", loading_messages=many[:10]
    )
    assert standin.statuses[-1]["loading_messages"] == many[:10]


async def test_suggested_prompts_are_one_to_four_titled_messages(client, standin):
    """https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts"""
    prompt = {"title": "Refund", "message": "Refund order 42"}
    for prompts in ([], [prompt] * 5, [{"title": "Refund"}], [{**prompt, "extra": "x"}]):
        assert (
            await refused(
                client.assistant_threads_setSuggestedPrompts(channel_id="D0ALICE", prompts=prompts)
            )
            == "invalid_arguments"
        )
    await client.assistant_threads_setSuggestedPrompts(
        channel_id="D0ALICE", title="How can I help?", prompts=[prompt]
    )
    assert standin.suggested_prompts[-1]["prompts"] == [prompt]


def home(*blocks):
    return {"type": "home", "blocks": list(blocks)}


SECTION = {"type": "section", "text": {"type": "mrkdwn", "text": "hello"}}


async def test_views_publish_refuses_a_stale_hash_and_blocks_slack_refuses(client, standin):
    """https://docs.slack.dev/reference/methods/views.publish: `hash_conflict` when the hash is
    not the current view's; `invalid_blocks` for blocks Slack does not take."""
    first = await client.views_publish(user_id="U0ALICE", view=home(SECTION))
    current = first["view"]["hash"]
    assert (
        await refused(client.views_publish(user_id="U0ALICE", view=home(SECTION), hash="1.stale"))
        == "hash_conflict"
    )
    second = await client.views_publish(user_id="U0ALICE", view=home(SECTION), hash=current)
    assert second["view"]["id"] == first["view"]["id"]
    assert second["view"]["hash"] != current
    for bad in (
        {"type": "section"},  # neither text nor fields
        {"type": "actions", "elements": []},
        {"type": "header", "text": {"type": "mrkdwn", "text": "x"}},  # plain_text only
        {"type": "input", "label": {"type": "plain_text", "text": "x"}, "element": {}},
        {"type": "no_such_block"},
    ):
        code = await refused(client.views_publish(user_id="U0ALICE", view=home(bad)))
        assert code == "invalid_blocks", bad
    dup = {**SECTION, "block_id": "same"}
    assert await refused(client.views_publish(user_id="U0ALICE", view=home(dup, dup))) == (
        "invalid_blocks"
    )
    assert (
        await refused(client.views_publish(user_id="U0ALICE", view={"type": "modal", "blocks": []}))
        == "invalid_arguments"
    )


async def test_views_publish_needs_the_home_tab():
    async with SlackStandIn(home_tab=False) as homeless:
        client = AsyncWebClient(token="xoxb-test", base_url=homeless.api_url)
        code = await refused(client.views_publish(user_id="U0ALICE", view=home(SECTION)))
    assert code == "not_enabled"


def modal(**extra):
    return {
        "type": "modal",
        "title": {"type": "plain_text", "text": "Deny"},
        "submit": {"type": "plain_text", "text": "Deny"},
        "blocks": [SECTION],
        **extra,
    }


async def test_views_open_takes_a_trigger_once_and_within_three_seconds(client, standin):
    """https://docs.slack.dev/reference/methods/views.open: `invalid_trigger_id`,
    `exchanged_trigger_id` (already used), `expired_trigger_id` (3 s after the interaction)."""
    now = [1000.0]
    standin.clock = lambda: now[0]
    standin.trigger_lifetime = TRIGGER_LIFETIME
    assert await refused(client.views_open(trigger_id="never.issued", view=modal())) == (
        "invalid_trigger_id"
    )
    standin.issue_trigger("t.1", "U0ALICE")
    opened = await client.views_open(trigger_id="t.1", view=modal())
    assert opened["view"]["type"] == "modal"
    assert await refused(client.views_open(trigger_id="t.1", view=modal())) == (
        "exchanged_trigger_id"
    )
    standin.issue_trigger("t.2", "U0ALICE")
    now[0] += 3.5
    assert await refused(client.views_open(trigger_id="t.2", view=modal())) == (
        "expired_trigger_id"
    )
    standin.issue_trigger("t.3", "U0ALICE")
    too_long = modal(title={"type": "plain_text", "text": "x" * 25})
    assert await refused(client.views_open(trigger_id="t.3", view=too_long)) == (
        "invalid_arguments"
    )
    metadata = modal(private_metadata="x" * 3001)
    assert await refused(client.views_open(trigger_id="t.3", view=metadata)) == (
        "invalid_arguments"
    )
    # a refused call does not use the trigger up
    assert (await client.views_open(trigger_id="t.3", view=modal()))["ok"]
    assert [m.user for m in standin.modals] == ["U0ALICE", "U0ALICE"]


async def test_message_blocks_are_checked_as_slack_checks_them(client, standin):
    """What a message's blocks may hold: a feedback_buttons element only in context_actions,
    and both of its buttons with a value (https://docs.slack.dev/reference/block-kit/
    block-elements/feedback-buttons-element)."""
    good = {
        "type": "context_actions",
        "elements": [
            {
                "type": "feedback_buttons",
                "action_id": "feedback",
                "positive_button": {"text": {"type": "plain_text", "text": "👍"}, "value": "up"},
                "negative_button": {"text": {"type": "plain_text", "text": "👎"}, "value": "down"},
            }
        ],
    }
    assert (await client.chat_postMessage(channel=CHANNEL, text="t", blocks=[good]))["ok"]
    no_value = {"type": "context_actions", "elements": [{**good["elements"][0]}]}
    no_value["elements"][0]["negative_button"] = {"text": {"type": "plain_text", "text": "👎"}}
    misplaced = {"type": "actions", "elements": good["elements"]}
    for blocks in ([no_value], [misplaced]):
        code = await refused(client.chat_postMessage(channel=CHANNEL, text="t", blocks=blocks))
        assert code == "invalid_blocks"


async def test_a_permalink_names_a_message_the_channel_holds(client, standin):
    parent = a_thread(standin, 1)
    reply = standin.thread(CHANNEL, parent)[-1].ts
    link = (await client.chat_getPermalink(channel=CHANNEL, message_ts=reply))["permalink"]
    assert link == (
        f"https://demo.slack.com/archives/{CHANNEL}/p{reply.replace('.', '')}"
        f"?thread_ts={parent}&cid={CHANNEL}"
    )
    assert await refused(client.chat_getPermalink(channel=CHANNEL, message_ts="1.000009")) == (
        "message_not_found"
    )
