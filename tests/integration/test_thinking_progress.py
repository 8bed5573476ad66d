"""Progress between tool calls, through the engine, on every store: the newest models say what
they are doing between tool calls in (summarized) thinking, which the turn shows live as
`progress.updated` and never stores or answers with.
"""

from __future__ import annotations

from anthropic import AsyncAnthropic

from agent import (
    Agent,
    AnthropicModel,
    AssistantMessage,
    RecordingSink,
    Runtime,
    SessionStore,
    ThinkingBlock,
    TurnStatus,
    tool,
)
from agent.seams import ProgressUpdated
from tests.support.anthropic_signatures import sign
from tests.support.anthropic_standin import AnthropicStandin, Text, Thinking, ToolUse, sse_reply

FIRST = "Looking the order up before answering."
SECOND = "The order shipped; summarising the tracking."


async def test_progress_is_shown_live_and_never_stored_or_said(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    @tool
    async def lookup(order: str) -> dict[str, str]:
        """Look an order up."""
        return {"status": "shipped"}

    agent = Agent(name="orders", instructions="Answer about orders.", tools=[lookup])
    api.enqueue(
        sse_reply(Thinking(FIRST, "sig-1"), ToolUse("tu_1", "lookup", {"order": "A-1"})),
        sse_reply(Thinking(SECOND, "sig-2"), Text("It shipped yesterday.")),
    )
    model = AnthropicModel(client=client, model="claude-opus-5-5", restart_delay=0)
    sink = RecordingSink()

    async with Runtime(store, model, agent=agent, sink=sink, poll_interval=0.02) as runtime:
        result = await runtime.session(agent, "s1").turn("Where is order A-1?")

    assert result.status == TurnStatus.COMPLETED
    assert result.text == "It shipped yesterday."
    progress = [e for e in sink.events if isinstance(e, ProgressUpdated)]
    # Each replaces the last: the whole progress of its step so far, as it grows.
    assert [p.text for p in progress if p.index == 1][-1] == FIRST
    assert [p.text for p in progress if p.index == 3][-1] == SECOND
    assert all(p.seq == 0 for p in progress)
    first_step = [p.text for p in progress if p.index == 1]
    assert first_step == sorted(first_step, key=len)
    assert len(first_step) > 1
    # Never in the durable log, never the model's words.
    logged = await store.read_events("s1", 0, 1000)
    assert "progress.updated" not in {e.type for e in logged}
    for event in logged:
        text = getattr(event, "text", "")
        assert FIRST not in text
        assert SECOND not in text
    said = [m for m in await store.load_transcript("s1") if isinstance(m, AssistantMessage)]
    assert [m.text for m in said] == ["", "It shipped yesterday."]
    # The blocks themselves are kept verbatim: the API needs them echoed.
    assert said[0].content[0] == ThinkingBlock(
        thinking=FIRST, signature=sign("claude-opus-5-5", "sig-1")
    )
    assert api.bodies[1]["messages"][1]["content"][0]["thinking"] == FIRST
