"""A local context budget judged by the API's token count, not characters / 4: the stand-in
counts a character outside ASCII as the token or more it is, as the API does, so a Japanese
thread the estimate thinks is small is trimmed to what really fits."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from anthropic import AsyncAnthropic

from agent import AnthropicModel, AssistantMessage, Message, ModelSettings, TextBlock, UserMessage
from agent.models._anthropic_request import estimate_tokens, message_params
from agent.seams import ModelReply, ModelRequest
from tests.support.anthropic_context import tokens_of
from tests.support.anthropic_standin import AnthropicStandin, Text, http_error, sse_reply

KEY = "sk-ant-test-key-0123456789"
OLD = "claude-sonnet-4-6"


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
    yield client
    await client.close()


def thread(text: str, n: int = 3) -> list[Message]:
    messages: list[Message] = []
    for i in range(n):
        messages += [
            UserMessage(turn_id=f"t{i}", text=f"question {i} {text}"),
            AssistantMessage(
                turn_id=f"t{i}", content=(TextBlock(text=f"answer {i}"),), stop_reason="end_turn"
            ),
        ]
    return [*messages, UserMessage(turn_id="now", text="the latest question")]


async def send(model: AnthropicModel, messages: list[Message]) -> None:
    request = ModelRequest(system="Be brief.", messages=messages, settings=ModelSettings())
    events = [event async for event in model.stream(request)]
    assert isinstance(events[-1], ModelReply)


async def test_a_thread_the_estimate_thinks_fits_is_cut_to_what_the_count_says(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    messages = thread("日本語の文章です。" * 1000)  # 9,000 characters an exchange
    params = message_params(messages)
    assert estimate_tokens(params) < 12_000 < tokens_of(params), "the estimate is blind to it"
    api.enqueue(sse_reply(Text("ok")))
    await send(AnthropicModel(client=client, model=OLD, max_context_tokens=12_000), messages)
    [sent] = api.bodies
    assert tokens_of(sent["messages"]) <= 12_000
    assert sent["messages"][0]["content"][0]["text"].startswith("question 2")
    assert 2 <= len(api.counts) <= 3
    assert api.counts[0].body["context_management"] == sent["context_management"]


async def test_a_thread_that_fits_is_counted_once_and_sent_whole(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    messages = thread("plain English words. " * 50)
    api.enqueue(sse_reply(Text("ok")))
    await send(AnthropicModel(client=client, model=OLD, max_context_tokens=12_000), messages)
    [sent] = api.bodies
    assert len(sent["messages"]) == 7
    assert len(api.counts) == 1


async def test_without_a_budget_nothing_is_counted(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("ok")))
    await send(AnthropicModel(client=client, model=OLD), thread("words"))
    assert api.counts == []


async def test_when_counting_fails_the_estimate_bounds_the_request(
    api: AnthropicStandin, client: AsyncAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    """A gateway without the counting endpoint still gets its turns; the operator hears once."""
    api.count_error = http_error(404, "not_found_error", retry_after_ms=None)
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")))
    model = AnthropicModel(client=client, model=OLD, max_context_tokens=3000)
    messages = thread("words " * 1000)
    await send(model, messages)
    await send(model, messages)
    first, _ = api.bodies
    assert first["messages"][0]["content"][0]["text"].startswith("question 2")
    warnings = [r for r in caplog.records if "token counting failed" in r.getMessage()]
    assert len(warnings) == 1
    assert KEY not in warnings[0].getMessage()
