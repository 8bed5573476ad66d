"""A thread longer than the model's budget, through the engine, the real SDK and the stand-in,
on every store: the new family's thread is compacted by the API and the compaction block is
stored, so another worker sends the same prefix; the old family's is bounded by the local window.
"""

from __future__ import annotations

from typing import Any

from anthropic import AsyncAnthropic

from agent import Agent, AnthropicModel, AssistantMessage, Runtime, SessionStore, TurnStatus
from agent._messages import CompactionBlock
from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

NEW = "claude-opus-5-5"
OLD = "claude-sonnet-4-6"
PARAGRAPH = "word " * 16_000  # about 20,000 tokens by the stand-in's count


async def _turns(
    store: SessionStore,
    api: AnthropicStandin,
    model: AnthropicModel,
    first: int,
    last: int,
    *,
    context_messages: int = 400,
    long: bool = True,
) -> None:
    agent = Agent(name="a", instructions="Answer.")
    async with Runtime(
        store, model, agent=agent, poll_interval=0.02, context_messages=context_messages
    ) as runtime:
        session = runtime.session(agent, "s1")
        for n in range(first, last):
            api.enqueue(sse_reply(Text(f"answer {n}")))
            text = f"question {n} {PARAGRAPH}" if long else f"question {n}"
            result = await session.result(await session.start(text))
            assert result.status == TurnStatus.COMPLETED, result


def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without cache breakpoints, which move to the newest block each request."""
    return [
        {
            **m,
            "content": [
                {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b
                for b in m["content"]
            ],
        }
        for m in messages
    ]


async def test_the_new_family_compacts_and_another_worker_sends_the_same_prefix(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    def model() -> AnthropicModel:
        return AnthropicModel(client=client, model=NEW, restart_delay=0, compact_at_tokens=50_000)

    await _turns(store, api, model(), 0, 4)
    transcript = await store.load_transcript("s1")
    compacted = [
        (i, b)
        for i, m in enumerate(transcript)
        if isinstance(m, AssistantMessage)
        for b in m.content
        if isinstance(b, CompactionBlock)
    ]
    [(at, block)] = compacted  # the third request passed 50,000 tokens
    assert at == 5
    assert block.content
    fourth = api.bodies[3]["messages"]
    assert fourth[0]["content"][0]["text"].startswith("question 2"), "read from the compaction"
    assert fourth[1]["content"][0]["type"] == "compaction"

    # Another worker (a new runtime, a new adapter) runs the next turn from the stored thread.
    await _turns(store, api, model(), 4, 5)
    fifth = api.bodies[4]["messages"]
    assert _unmarked(fifth[: len(fourth)]) == _unmarked(fourth), "the same prefix, byte for byte"
    assert all(b.get("model", NEW) == NEW for b in api.bodies)


async def test_a_compaction_older_than_the_message_window_is_still_sent(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """`CONTEXT_MESSAGES` no longer cuts a thread the API compacts: short turns past the
    window still go out from the compaction (stored at index 5, in question 2's turn), on the
    worker that ran them and on another one."""
    model = AnthropicModel(client=client, model=NEW, restart_delay=0, compact_at_tokens=50_000)
    await _turns(store, api, model, 0, 4, context_messages=2)
    await _turns(store, api, model, 4, 8, context_messages=2, long=False)
    again = AnthropicModel(client=client, model=NEW, restart_delay=0, compact_at_tokens=50_000)
    await _turns(store, api, again, 8, 9, context_messages=2, long=False)

    for body in api.bodies[3:]:
        sent = body["messages"]
        assert sent[0]["content"][0]["text"].startswith("question 2")
        assert sent[1]["content"][0]["type"] == "compaction"
    assert len(api.bodies[-1]["messages"]) == 2 * 6 + 1  # questions 2 to 7 and their answers, 8


async def test_the_old_family_keeps_the_local_window(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    model = AnthropicModel(client=client, model=OLD, restart_delay=0, max_context_tokens=60_000)
    await _turns(store, api, model, 0, 5)
    transcript = await store.load_transcript("s1")
    assert len(transcript) == 10, "the stored thread is whole"
    assert not any(
        isinstance(b, CompactionBlock)
        for m in transcript
        if isinstance(m, AssistantMessage)
        for b in m.content
    )
    last = api.bodies[-1]
    assert last["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}
    opening = last["messages"][0]["content"][0]["text"]
    assert not opening.startswith("question 0"), "the oldest exchanges are left out"
    assert len(last["messages"]) < 9
