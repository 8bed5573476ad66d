"""The bot against a Slack stand-in as strict as Slack: a post whose answer was lost is found by
what Slack keeps (streams cannot carry metadata), in threads longer than one page of replies, and
the bot never sends a call Slack would refuse."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent import ScriptedReply, ToolCall
from agent.models import step_in_turn
from agent.seams import ModelEvent, ModelRequest, StreamRestart, TextDelta
from bot.testing.workspace import is_request
from tests.bot.agents import AGENT, REFUND, SIMPLE, model
from tests.bot.harness import ONE_PROCESS, approval, eventually, idle, rendered_out, replies

CHANNEL = "C0CONTRACT"
pytestmark = pytest.mark.usefixtures("serving")


def long_thread(app: Any, standin: Any, replies_before: int) -> str:
    """A thread already longer than one page of `conversations.replies`."""
    parent = app.slack.new_ts()
    standin.add_user_message(CHANNEL, parent, "U0ALICE", "the order thread")
    for n in range(replies_before):
        standin.add_user_message(CHANNEL, app.slack.new_ts(), "U0BOB", f"note {n}", parent)
    return parent


def refused(standin: Any) -> list[tuple[str, Any]]:
    return [
        (c.method, c.response.get("error"))
        for c in standin.calls
        if c.status == 200 and c.response.get("ok") is False
    ]


async def test_a_stream_whose_start_answer_was_lost_is_found_not_started_again(
    db_url, launch, standin
):
    standin.fail("chat.startStream", "server_error", applied=True)
    app = await launch(db_url, AGENT, model(SIMPLE))
    parent = long_thread(app, standin, 250)
    await app.slack.mention("U0ALICE", "hello", channel=CHANNEL, thread_ts=parent)
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    [reply] = replies(standin, CHANNEL)
    assert reply.thread_ts == parent
    assert reply.text.startswith("Hello from the agent.")
    assert len(standin.calls_to("chat.startStream")) == 1
    assert refused(standin) == []
    # the lookup read the whole thread, page by page
    pages = standin.calls_to("conversations.replies")
    assert len(pages) >= 3
    assert pages[-1].response["has_more"] is False


async def test_an_approval_whose_post_answer_was_lost_in_a_long_thread_is_posted_once(
    db_url, launch, standin
):
    standin.fail("chat.postMessage", "server_error", applied=True)
    app = await launch(db_url, AGENT, model(REFUND))
    parent = long_thread(app, standin, 250)
    await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL, thread_ts=parent)
    await eventually(lambda: approval(standin, CHANNEL) is not None)
    await eventually(lambda: len(standin.calls_to("conversations.replies")) >= 3)
    await rendered_out(db_url)  # a second post, if the lookup missed it, has come by now
    approvals = [m for m in standin.bot_messages(CHANNEL) if is_request(m)]
    assert len(approvals) == 1
    assert len(standin.calls_to("chat.postMessage")) == 1
    assert refused(standin) == []


async def test_a_stream_start_lost_in_a_crash_is_found_after_the_restart(db_url, launch, standin):
    """The process dies while chat.startStream is in flight (Slack did it, no answer came): the
    next process finds that message by what Slack keeps, not by metadata it never had."""
    standin.fail("chat.startStream", "hang", applied=True)
    first = await launch(db_url, AGENT, model(SIMPLE))
    parent = long_thread(app=first, standin=standin, replies_before=120)
    await first.slack.mention("U0ALICE", "hello", channel=CHANNEL, thread_ts=parent)
    [lost] = await eventually(lambda: standin.bot_messages(CHANNEL))
    await first.stop()

    await launch(db_url, AGENT, model(SIMPLE))
    # Found (by reading the thread): nothing of it was saved as shown (its start never
    # answered), so the log after the cursor fills it again; the reply is shown once, in that
    # message, where it started.

    def settled() -> bool:
        shown = replies(standin, CHANNEL)
        return len(shown) == 1 and "agent." in shown[0].text and idle(standin, CHANNEL)

    await eventually(settled)
    [reply] = replies(standin, CHANNEL)
    assert reply.ts == lost.ts
    assert reply.text.startswith("Hello from the agent.")
    assert refused(standin) == []
    assert standin.calls_to("conversations.replies")
    assert standin.calls_to("chat.delete") == []


class RestartingModel:
    """Step 1 calls a tool (the stream opens with its task); step 2 streams words, then the
    model stream is cut and restarted (what the Anthropic adapter does on a dropped
    connection), with a pause long enough for the renderer to flush in between."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if step_in_turn(request.messages) == 0:
            call = ToolCall(id="c_look", name="lookup_order", input={"order_id": "42"})
            yield ScriptedReply(tool_calls=[call]).reply()
            return
        await asyncio.sleep(1.5)
        yield TextDelta(text="Words the cut stream ")
        yield StreamRestart(reason="connection dropped")
        await asyncio.sleep(2.5)
        yield TextDelta(text="Order 42 is a mug.")
        yield ScriptedReply(text="Order 42 is a mug.").reply()


async def test_a_model_stream_restart_sends_no_empty_append(db_url, launch, standin):
    app = await launch(db_url, AGENT, RestartingModel())
    await app.slack.mention("U0ALICE", "what is order 42?", channel=CHANNEL)
    await eventually(lambda: any("mug" in m.text for m in replies(standin, CHANNEL)), within=30)
    await eventually(lambda: idle(standin, CHANNEL))
    [reply] = replies(standin, CHANNEL)
    assert "Words the cut stream" not in reply.text
    assert reply.text.strip().endswith("Order 42 is a mug.")
    assert refused(standin) == []
    for call in standin.calls_to("chat.appendStream"):
        assert call.args.get("chunks") or call.args.get("markdown_text")


@pytest.mark.parametrize("serving", [ONE_PROCESS], indirect=True)
async def test_every_edit_of_a_reply_changes_what_slack_shows(db_url, launch, standin):
    """A stream Slack stopped accepting goes on by `chat.update`: with `text` alone Slack would
    keep the streamed content and the words after it would never be seen. (One process: there
    the words arrive live, one append each; the renderer is the same in a worker.)"""
    standin.fail("chat.appendStream", "not_in_streaming_state")
    slow = model([ScriptedReply(text=["One ", "two ", "three ", "four."])], delta_delay=0.6)
    app = await launch(db_url, AGENT, slow)
    await app.slack.mention("U0ALICE", "count", channel=CHANNEL)
    await eventually(lambda: standin.calls_to("chat.update"), within=30)
    await eventually(lambda: idle(standin, CHANNEL))
    await eventually(lambda: any("four." in m.text for m in replies(standin, CHANNEL)))
    [reply] = replies(standin, CHANNEL)
    assert reply.text.startswith("One two three four.")
    for call in standin.calls_to("chat.update"):
        assert "markdown_text" in call.args or "blocks" in call.args
