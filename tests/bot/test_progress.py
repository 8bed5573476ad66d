"""Progress between tool calls on the newest models, in Slack: what the model says it is doing
between its tool calls arrives in summarized thinking (claude-opus-5-5 sends it only when asked,
https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5#text-between-tool-calls),
and the reply shows it as a "Thinking" card in its timeline while the step runs, settled when
the step commits; the reply's words never include it.

The real SDK drives the Anthropic stand-in; the model is wrapped so that, once a step's thinking
has streamed, it waits (up to 5 s) until Slack shows that step's progress before the step may
commit: "shown while the turn runs" is decided by the order of events, not by timing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import AnthropicModel
from agent.seams import ModelEvent, ModelReply, ModelRequest, ThinkingDelta
from bot.slack.rendering.progress import progress_line
from bot.testing import SlackStandIn
from tests.bot.agents import AGENT
from tests.bot.harness import eventually, idle, replies
from tests.support.anthropic_standin import AnthropicStandin, Text, Thinking, ToolUse, sse_reply

CHANNEL = "C0PROGRESS"
FIRST = "Order 41 was the wrong one.\nLooking up order 42 first."
SECOND = "Order 42 shipped; writing the answer."
ANSWER = "Order 42 shipped yesterday."
SHOW_WITHIN = 5.0
pytestmark = pytest.mark.usefixtures("serving")


def running_progress(standin: SlackStandIn, index: int) -> str | None:
    """The details Slack shows on step `index`'s progress card while it runs, if it does."""
    for message in standin.bot_messages(CHANNEL):
        task = message.tasks.get(f"progress:{index}")
        if task is not None and task.get("status") == "in_progress":
            return task.get("details") or None
    return None


@dataclass
class ShownBeforeCommit:
    """`AnthropicModel`, holding each step that showed progress until Slack shows the newest
    line of it on the step's running card."""

    inner: AnthropicModel
    standin: SlackStandIn
    seen: list[str] = field(default_factory=list)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        index = len(request.messages)  # the step commits as the transcript's next message
        progress = ""
        # Live events reach only a renderer already listening, and it places them by the
        # durable events it heard live: one that shows the turn hears the first step's.
        await eventually(lambda: self.rendering(), SHOW_WITHIN, "the turn is being rendered")
        async for event in self.inner.stream(request):
            if isinstance(event, ThinkingDelta):
                progress += event.text
            elif progress and isinstance(event, ModelReply):
                line = progress_line(progress)
                await eventually(
                    lambda line=line: running_progress(self.standin, index) == line,
                    SHOW_WITHIN,
                    "progress shown live",
                )
                self.seen.append(str(line))
            yield event

    def rendering(self) -> bool:
        shown = ("agents.sessions.setStatus", "assistant.threads.setStatus", "chat.startStream")
        return any(c.method in shown for c in self.standin.calls)


async def test_progress_between_tool_calls_is_shown_and_never_said(
    db_url: str, launch: Any, standin: SlackStandIn, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(
        sse_reply(Thinking("", "sig-0"), ToolUse("tu_1", "lookup_order", {"order_id": "41"})),
        sse_reply(Thinking(FIRST, "sig-1"), ToolUse("tu_2", "lookup_order", {"order_id": "42"})),
        sse_reply(Thinking(SECOND, "sig-2"), Text(ANSWER)),
    )
    inner = AnthropicModel(client=client, model="claude-opus-5-5", restart_delay=0)
    model = ShownBeforeCommit(inner, standin)
    app = await launch(db_url, AGENT, model)

    await app.slack.mention("U0ALICE", "where is order 42?", channel=CHANNEL)
    await eventually(lambda: ANSWER in "".join(m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))

    # Asked for, and shown live: the newest line of each step's progress, while it ran.
    assert all(b["thinking"]["display"] == "summarized" for b in api.bodies)
    assert model.seen == ["Looking up order 42 first.", SECOND]
    [reply] = replies(standin, CHANNEL)
    cards = {k: (t["status"], t.get("details")) for k, t in reply.tasks.items()}
    # Settled in its place in the timeline, between the calls; a step whose thinking came back
    # empty (nothing to show) has no card.
    assert [k for k in cards if k != "status"] == ["tu_1", "progress:3", "tu_2", "progress:5"]
    assert cards["progress:3"] == ("complete", "Looking up order 42 first.")
    assert cards["progress:5"] == ("complete", SECOND)
    # Never the reply's words.
    assert reply.text.strip() == ANSWER
    for said in ("Looking up", "writing the answer", "wrong one"):
        assert said not in reply.text
