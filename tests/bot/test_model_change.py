"""A deploy that changes ANTHROPIC_MODEL under live sessions, and a refusal, as a user sees them.

The bot runs Claude through the real SDK against the Anthropic stand-in, which signs each thinking
block for the model that wrote it and answers 400 to a request that carries another model's where
the family binds thinking to its model (as the API does; `tests.support.anthropic_signatures`).
A turn parks on Tuesday under one model with thinking in its reply, the bot is restarted on
another, the approval arrives: the turn finishes, and the new model was sent none of the old
one's thinking. The same for a session that was idle across the change. Both databases, both
serving modes.
"""

from __future__ import annotations

from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import AnthropicModel, AssistantMessage
from agent._stops import DECLINED
from bot.slack.inbound import session_key
from tests.bot.agents import AGENT
from tests.bot.harness import approval, buttons, eventually, idle, replies
from tests.support.anthropic_signatures import signer
from tests.support.anthropic_standin import AnthropicStandin, Text, Thinking, ToolUse, sse_reply

CHANNEL = "C0MODEL"
BEFORE = "claude-opus-5-5"
AFTER = "claude-fable-5-2"
"""Both of the family that binds thinking to the model that wrote it."""
pytestmark = pytest.mark.usefixtures("serving")


def claude(client: AsyncAnthropic, name: str) -> AnthropicModel:
    return AnthropicModel(client=client, model=name, restart_delay=0)


def thinking_sent(body: dict[str, Any]) -> list[str | None]:
    """Whose thinking a request carried (the model each block's signature names)."""
    return [
        signer(b.get("signature") or b.get("data"))
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b["type"] in ("thinking", "redacted_thinking")
    ]


async def said(standin: Any, text: str) -> None:
    await eventually(lambda: any(text in m.text for m in replies(standin, CHANNEL)), within=30)
    await eventually(lambda: idle(standin, CHANNEL), within=30)


async def test_a_turn_parked_under_one_model_is_approved_and_finished_by_the_next(
    db_url: str, launch: Any, standin: Any, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """Parked mid-batch: the refund waits for approval; the lookup after it in the batch ran
    beside it and finished before the turn parked, so only the refund runs again, under the new
    model, which reads both results in call order."""
    api.enqueue(
        sse_reply(
            Thinking("Refund first, then look it up.", "n1"),
            Text("Refunding it."),
            ToolUse("c_refund", "issue_refund", {"order_id": "42", "amount": 18.5}),
            ToolUse("c_lookup", "lookup_order", {"order_id": "42"}),
        )
    )
    app = await launch(db_url, AGENT, claude(client, BEFORE))
    ts = await app.slack.mention("U0ALICE", "refund order 42", channel=CHANNEL)
    message = await eventually(lambda: approval(standin, CHANNEL), within=30)
    await eventually(lambda: idle(standin, CHANNEL))
    key = session_key("T0DEMO", CHANNEL, ts)
    done = [m.call_id for m in await app.session(key).transcript() if m.role == "tool"]
    assert done == ["c_lookup"], "the lookup ran beside the refund and finished before the park"
    await app.stop()  # the deploy: the next bot runs another model

    api.enqueue(sse_reply(Thinking("Both done.", "n2"), Text("Refund done.")))
    again = await launch(db_url, AGENT, claude(client, AFTER))
    approve, _ = buttons(message)
    response = await again.slack.click(
        "U0ALICE", approve, channel=CHANNEL, message_ts=message.ts, thread_ts=ts
    )
    assert response.status_code == 200
    await said(standin, "Refund done.")

    [turn] = await again.turns(key)
    assert turn.status.value == "completed"
    assert turn.result["text"] == "Refund done."
    parked, resumed = api.bodies
    assert (parked["model"], resumed["model"]) == (BEFORE, AFTER)
    assert thinking_sent(resumed) == [], "the new model was sent none of the old one's thinking"
    tools = [b for m in resumed["messages"] for b in m["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in tools] == ["c_refund", "c_lookup"], "the batch finished"
    written = [
        m.model
        for m in await again.bot.runtime.store.load_transcript(key)
        if isinstance(m, AssistantMessage)
    ]
    assert written == [BEFORE, AFTER]


async def test_an_idle_session_goes_on_under_the_new_model(
    db_url: str, launch: Any, standin: Any, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Thinking("A greeting.", "n1"), Text("Hello there.")))
    app = await launch(db_url, AGENT, claude(client, BEFORE))
    ts = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    await said(standin, "Hello there.")
    await app.stop()

    api.enqueue(sse_reply(Thinking("Again.", "n2"), Text("Still here.")))
    again = await launch(db_url, AGENT, claude(client, AFTER))
    await again.slack.mention("U0ALICE", "still there?", channel=CHANNEL, thread_ts=ts)
    await said(standin, "Still here.")

    first, second = api.bodies
    assert thinking_sent(first) == []
    assert thinking_sent(second) == []
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    turns = await again.turns(session_key("T0DEMO", CHANNEL, ts))
    assert [t.status.value for t in turns] == ["completed", "completed"]


async def test_a_refusal_is_shown_as_declined_and_the_thread_goes_on_without_it(
    db_url: str, launch: Any, standin: Any, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(
        sse_reply(Text("Sure, here is"), stop_reason="refusal"),
        sse_reply(Text("Order 42 is a mug.")),
    )
    app = await launch(db_url, AGENT, claude(client, BEFORE))
    ts = await app.slack.mention("U0ALICE", "something it refuses", channel=CHANNEL)
    await said(standin, DECLINED)
    [shown] = [m for m in replies(standin, CHANNEL) if DECLINED in m.text]
    assert "Sure, here is" in shown.text

    await app.slack.mention("U0ALICE", "what is order 42?", channel=CHANNEL, thread_ts=ts)
    await said(standin, "Order 42 is a mug.")

    later = api.bodies[-1]
    assert [m["role"] for m in later["messages"]] == ["user"]
    assert later["messages"][0]["content"][0]["text"] == "what is order 42?"
