"""A long thread and the API's context management, through the real SDK against the stand-in.

The new family compacts: the request carries `context_management` and the compaction beta, the
compaction block the API answers with is kept in the reply whole, and sent back byte for byte
(the stand-in checks its signature); a request starts at it. The old family keeps the local
window, with tool-result clearing. A model id no family owns, or the setting off, sends the
plain request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from anthropic import AsyncAnthropic

from agent import (
    AbnormalStopError,
    AnthropicModel,
    AssistantMessage,
    Message,
    ModelError,
    ModelSettings,
    TextBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent._messages import CompactionBlock, message_from_json, message_to_json
from agent.models._anthropic_context import context_transcript
from agent.seams import ModelReply, ModelRequest
from tests.support.anthropic_context import sign
from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

KEY = "sk-ant-test-key-0123456789"
NEW = "claude-opus-5-5"
OLD = "claude-sonnet-4-5"  # the Claude 4 family: a 200,000-token window, no compaction
LONG = "word " * 40_000  # about 50,000 tokens by the stand-in's estimate


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
    yield client
    await client.close()


def model_for(client: AsyncAnthropic, model: str, **options: Any) -> AnthropicModel:
    return AnthropicModel(client=client, model=model, restart_delay=0, **options)


def ask(*messages: Message) -> ModelRequest:
    return ModelRequest(system="Be brief.", messages=messages, settings=ModelSettings())


def exchange(n: int, text: str = "") -> list[Message]:
    return [
        UserMessage(turn_id=f"t{n}", text=f"question {n} {text}"),
        AssistantMessage(
            turn_id=f"t{n}", content=(TextBlock(text=f"answer {n}"),), stop_reason="end_turn"
        ),
    ]


async def reply(model: AnthropicModel, request: ModelRequest) -> ModelReply:
    events = [event async for event in model.stream(request)]
    last = events[-1]
    assert isinstance(last, ModelReply)
    return last


def compaction(summary: str = "Summary so far.") -> CompactionBlock:
    return CompactionBlock(content=summary, signature=sign(summary), tool_changes=())


async def test_the_new_family_asks_for_compaction_with_its_beta(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("Hi.")))
    model = model_for(client, NEW, compact_at_tokens=60_000)
    await reply(model, ask(UserMessage(turn_id="t", text="hi")))
    [sent] = api.requests
    assert sent.body["context_management"] == {
        "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 60000}}]
    }
    assert sent.headers["anthropic-beta"] == "compact-2026-01-12"


async def test_the_old_family_clears_tool_results_and_keeps_the_local_window(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("Hi.")))
    model = model_for(client, OLD, max_context_tokens=3000)
    history = [m for n in range(3) for m in exchange(n, "word " * 2000)]
    await reply(model, ask(*history, UserMessage(turn_id="t3", text="latest")))
    [sent] = api.requests
    assert sent.body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    assert sent.headers["anthropic-beta"] == "context-management-2025-06-27"
    texts = [m["content"][0].get("text", "") for m in sent.body["messages"]]
    assert len(texts) == 3, "the local window still cuts"
    assert texts[0].startswith("question 2")


@pytest.mark.parametrize(
    ("model", "options"),
    [("claude-test-gateway-alias", {}), (NEW, {"context_management": "off"})],
)
async def test_an_unknown_model_or_the_setting_off_sends_the_plain_request(
    api: AnthropicStandin, client: AsyncAnthropic, model: str, options: dict[str, Any]
) -> None:
    api.enqueue(sse_reply(Text("Hi.")))
    await reply(model_for(client, model, **options), ask(UserMessage(turn_id="t", text="hi")))
    [sent] = api.requests
    assert "context_management" not in sent.body
    assert "anthropic-beta" not in sent.headers


async def test_a_compaction_block_is_kept_and_sent_back_byte_for_byte(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """Past the trigger the API answers with a compaction block first; it survives storage
    (JSON) and the next request sends it exactly as returned, from its exchange onward."""
    model = model_for(client, NEW, compact_at_tokens=50_000)
    history = [*exchange(0, LONG), *exchange(1, LONG)]
    api.enqueue(sse_reply(Text("Here is the answer.")))
    got = await reply(model, ask(*history, UserMessage(turn_id="t2", text="question 2")))
    block, text = got.content
    assert isinstance(block, CompactionBlock)
    assert block.content
    assert text == TextBlock(text="Here is the answer.")
    stored = message_from_json(
        message_to_json(
            AssistantMessage(turn_id="t2", content=got.content, stop_reason=got.stop_reason)
        )
    )
    returned = api.requests[0]
    api.enqueue(sse_reply(Text("Short now.")))
    after = [*history, UserMessage(turn_id="t2", text="question 2"), stored]
    await reply(model, ask(*after, UserMessage(turn_id="t3", text="question 3")))
    sent = api.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[0]["content"][0]["text"] == "question 2", "read from the compaction onward"
    echoed = sent[1]["content"][0]
    assert echoed == {
        "type": "compaction",
        "content": block.content,
        "signature": sign(block.content),
        "tool_changes": [],
    }
    assert "compaction" not in str(returned.body["messages"])


async def test_only_the_newest_compaction_is_sent(api: AnthropicStandin) -> None:
    """Two blocks with content are a 400 (compaction_block_ambiguous): an older one in the
    same exchange (a long tool loop compacted twice) is left out."""
    first, second = compaction("first"), compaction("second")
    messages: list[Message] = [
        *exchange(0),
        UserMessage(turn_id="t1", text="go"),
        AssistantMessage(
            turn_id="t1",
            content=(first, ToolCall(id="a", name="lookup", input={})),
            stop_reason="tool_use",
        ),
        ToolMessage(turn_id="t1", call_id="a", name="lookup", result="x"),
        AssistantMessage(
            turn_id="t1", content=(second, TextBlock(text="ok")), stop_reason="end_turn"
        ),
        UserMessage(turn_id="t2", text="next"),
    ]
    kept = context_transcript(messages, compacts=True)
    assert kept[0] == UserMessage(turn_id="t1", text="go")
    blocks = [b for m in kept if isinstance(m, AssistantMessage) for b in m.content]
    assert first not in blocks
    assert second in blocks
    plain = context_transcript(messages, compacts=False)
    assert len(plain) == len(messages)
    assert not any(
        isinstance(b, CompactionBlock)
        for m in plain
        if isinstance(m, AssistantMessage)
        for b in m.content
    ), "a model without compaction is never sent a compaction block"


async def test_an_old_model_after_compaction_gets_the_whole_thread_without_the_block(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("Hi.")))
    compacted = AssistantMessage(
        turn_id="t1", content=(compaction(), TextBlock(text="answer 1")), stop_reason="end_turn"
    )
    messages: Sequence[Message] = [
        *exchange(0),
        UserMessage(turn_id="t1", text="question 1"),
        compacted,
        UserMessage(turn_id="t2", text="question 2"),
    ]
    await reply(model_for(client, OLD), ask(*messages))
    sent = api.requests[0].body["messages"]
    assert len(sent) == 5
    assert "compaction" not in str(sent)


async def test_a_reply_that_fills_the_window_says_so(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """`model_context_window_exceeded` with nothing said is an error naming the way out."""
    big = "word " * 150_000  # about 190,000 tokens: the old family's window is 200,000
    api.enqueue(sse_reply(output_tokens=20_000))
    with pytest.raises(AbnormalStopError, match="context window"):
        await reply(
            model_for(client, OLD, context_management="off"),
            ask(UserMessage(turn_id="t", text=big)),
        )


def test_a_compaction_trigger_below_the_floor_fails_at_start(client: AsyncAnthropic) -> None:
    with pytest.raises(ModelError, match="at least 50,000"):
        model_for(client, NEW, compact_at_tokens=10_000)


@pytest.mark.parametrize("model", [NEW, OLD])
@pytest.mark.parametrize("thinking", [False, True])
async def test_the_beta_request_is_the_plain_one_plus_context_management(
    api: AnthropicStandin, client: AsyncAnthropic, model: str, thinking: bool
) -> None:
    """The beta call is a second call site: a field the plain request sends (a model setting
    added later) must not go missing from it, or every turn of that family would lose it."""
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")))
    messages = exchange(0)
    request = ModelRequest(
        system="Be brief.",
        messages=(*messages, UserMessage(turn_id="t1", text="hi")),
        settings=ModelSettings(thinking=thinking),
    )
    for mode in ("auto", "off"):
        await reply(model_for(client, model, context_management=mode), request)
    managed, plain = api.bodies
    assert managed.pop("context_management")
    assert managed == plain
