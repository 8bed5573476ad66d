"""The Slack stand-in refuses what Slack refuses: if it quietly took more than Slack does, every
bot test would pass against a Slack that does not exist. Driven with the real `AsyncWebClient`
over HTTP, as the bot drives it."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

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
