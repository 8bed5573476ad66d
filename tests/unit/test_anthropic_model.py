"""`AnthropicModel` driven through the real `anthropic` SDK against a local Messages API stand-in.

Nothing here mocks the SDK: every reply is server-sent events over HTTP that the SDK parses
itself, and every assertion about what was sent reads the JSON body the stand-in received.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import json
import logging
import types
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anthropic
import httpcore2
import httpx2
import pytest
from anthropic import AsyncAnthropic
from anthropic.resources.messages import AsyncMessages

from agent import (
    AbnormalStopError,
    AnthropicModel,
    AnthropicSettings,
    AssistantMessage,
    Message,
    ModelError,
    ModelSettings,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    Usage,
    UserMessage,
)
from agent._messages import RedactedThinkingBlock
from agent.models import family_of
from agent.models._anthropic_request import bound_transcript
from agent.seams import ModelEvent, ModelReply, ModelRequest, StreamRestart, TextDelta, ToolSpec
from tests.support.anthropic_signatures import sign
from tests.support.anthropic_standin import (
    AnthropicStandin,
    RedactedThinking,
    SseReply,
    Text,
    Thinking,
    ToolUse,
    http_error,
    sse_reply,
)

KEY = "sk-ant-test-key-0123456789"
MANUAL_THINKING = "claude-sonnet-4-6"
"""A model that still takes a manual thinking budget (and adaptive thinking, off by default)."""
UNKNOWN_BUDGET = family_of("claude-test").default_max_tokens
"""An id the family table does not know is read as the newest family, with its output budget."""
EPHEMERAL = {"type": "ephemeral"}
T = "turn-1"
TOOLS = (
    ToolSpec(name="lookup", description="Look a thing up.", input_schema={"type": "object"}),
    ToolSpec(name="weather", description="Weather for a city.", input_schema={"type": "object"}),
)


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=2)
    yield client
    await client.close()


@pytest.fixture
def model(client: AsyncAnthropic) -> AnthropicModel:
    return AnthropicModel(client=client, model="claude-test", restart_delay=0)


def ask(*messages: Message, system: str = "Be brief.", **settings: Any) -> ModelRequest:
    return ModelRequest(
        system=system,
        messages=messages or (UserMessage(turn_id=T, text="hi"),),
        tools=TOOLS,
        settings=ModelSettings(**settings),
    )


async def collect(model: AnthropicModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


async def collect_until_error(
    model: AnthropicModel, request: ModelRequest, error: type[Exception]
) -> tuple[list[ModelEvent], Exception]:
    events: list[ModelEvent] = []

    async def consume() -> None:
        async for event in model.stream(request):
            events.append(event)

    with pytest.raises(error) as info:
        await consume()
    return events, info.value


def reply_of(events: Sequence[ModelEvent]) -> ModelReply:
    assert isinstance(events[-1], ModelReply)
    assert not any(isinstance(e, ModelReply) for e in events[:-1])
    return events[-1]


def deltas(events: Sequence[ModelEvent]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


def segments(events: Sequence[ModelEvent]) -> list[str]:
    """The text streamed between restart markers; each must be a prefix of the final text."""
    parts = [""]
    for event in events:
        if isinstance(event, StreamRestart):
            parts.append("")
        elif isinstance(event, TextDelta):
            parts[-1] += event.text
    final = "".join(b.text for b in reply_of(events).content if isinstance(b, TextBlock))
    assert all(final.startswith(part) for part in parts)
    assert parts[-1] == final
    return parts


def rendered(events: Sequence[ModelEvent]) -> str:
    """What a renderer shows: deltas appended, everything dropped at a restart."""
    shown = ""
    for event in events:
        if isinstance(event, StreamRestart):
            shown = ""
        elif isinstance(event, TextDelta):
            shown += event.text
    return shown


def tool_exchange(text: str = "") -> tuple[Message, ...]:
    return (
        UserMessage(turn_id=T, text=text or "look two things up"),
        AssistantMessage(
            turn_id=T,
            content=(
                TextBlock(text="Looking."),
                ToolCall(id="tu_a", name="lookup", input={"q": "a"}),
                ToolCall(id="tu_b", name="weather", input={"city": "Paris"}),
            ),
            stop_reason="tool_use",
        ),
        ToolMessage(turn_id=T, call_id="tu_a", name="lookup", result={"found": [1, 2]}),
        ToolMessage(turn_id=T, call_id="tu_b", name="weather", result="sunny"),
    )


# Text, transcript mapping, tools


async def test_text_only_turn(api: AnthropicStandin, model: AnthropicModel) -> None:
    api.enqueue(sse_reply(Text("Hello there, friend")))

    events = await collect(model, ask(UserMessage(turn_id=T, text="hi", by="U1")))

    assert deltas(events) == ["Hello ", "there, ", "friend"]
    reply = reply_of(events)
    assert reply.content == (TextBlock(text="Hello there, friend"),)
    assert reply.stop_reason == "end_turn"
    (sent,) = api.requests
    assert sent.credential == KEY
    assert sent.body["model"] == "claude-test"
    assert sent.body["max_tokens"] == UNKNOWN_BUDGET
    assert sent.body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]
    # An unknown id is read as the newest family: it thinks unless told otherwise, and its
    # thinking (what it says between tool calls) comes back only when asked for.
    assert sent.body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert "temperature" not in sent.body


async def test_trigger_is_sent_as_a_user_message(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("Good morning")))
    trigger = TriggerMessage(turn_id=T, text="Post the digest", by="cron:daily", kind="proactive")

    await collect(model, ask(trigger))

    (message,) = api.bodies[0]["messages"]
    assert message["role"] == "user"
    assert message["content"][0]["text"] == "Post the digest"


async def test_tool_use_turn_with_two_parallel_calls(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    nested = {"query": "weather in Paris", "filters": {"days": [1, 2, 3], "units": "metric"}}
    api.enqueue(
        sse_reply(
            Text("Let me check."),
            ToolUse("tu_a", "lookup", nested),
            ToolUse("tu_b", "weather", {"city": "Paris"}),
        ),
        sse_reply(Text("Sunny, and found two.")),
    )

    first = await collect(model, ask(UserMessage(turn_id=T, text="look two things up")))

    assert deltas(first) == ["Let ", "me ", "check."]
    reply = reply_of(first)
    assert reply.stop_reason == "tool_use"
    assert reply.content == (
        TextBlock(text="Let me check."),
        ToolCall(id="tu_a", name="lookup", input=nested),
        ToolCall(id="tu_b", name="weather", input={"city": "Paris"}),
    )
    assert api.bodies[0]["tools"] == [
        {"name": "lookup", "description": "Look a thing up.", "input_schema": {"type": "object"}},
        {
            "name": "weather",
            "description": "Weather for a city.",
            "input_schema": {"type": "object"},
            "cache_control": EPHEMERAL,
        },
    ]

    transcript = (
        UserMessage(turn_id=T, text="look two things up"),
        AssistantMessage(turn_id=T, content=reply.content, stop_reason=reply.stop_reason),
        ToolMessage(turn_id=T, call_id="tu_a", name="lookup", result={"found": [1, 2]}),
        ToolMessage(turn_id=T, call_id="tu_b", name="weather", result="sunny"),
    )
    second = await collect(model, ask(*transcript))

    assert reply_of(second).content == (TextBlock(text="Sunny, and found two."),)
    assistant, results = api.bodies[1]["messages"][1:]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "tu_a", "name": "lookup", "input": nested},
            {"type": "tool_use", "id": "tu_b", "name": "weather", "input": {"city": "Paris"}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu_a", "content": '{"found": [1, 2]}'},
            {
                "type": "tool_result",
                "tool_use_id": "tu_b",
                "content": "sunny",
                "cache_control": EPHEMERAL,
            },
        ],
    }


async def test_tool_error_is_sent_with_is_error(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("The lookup failed.")))
    user, assistant, ok, _ = tool_exchange()
    failed = ToolMessage(
        turn_id=T,
        call_id="tu_b",
        name="weather",
        result={"error": "KeyError: 'Paris'"},
        is_error=True,
    )

    await collect(model, ask(user, assistant, ok, failed))

    first, second = api.bodies[0]["messages"][2]["content"]
    assert "is_error" not in first
    assert second["is_error"] is True
    assert json.loads(second["content"]) == {"error": "KeyError: 'Paris'"}


async def test_the_engines_note_follows_the_tool_result_as_a_text_block_of_its_own(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("Understood.")))
    user, assistant, ok, _ = tool_exchange()
    noted = ToolMessage(
        turn_id=T,
        call_id="tu_b",
        name="weather",
        result={"refunded": False},
        note="The answer to 'approve' came with a reason from U1: wrong amount",
    )

    await collect(model, ask(user, assistant, ok, noted))

    first, second = api.bodies[0]["messages"][2]["content"]
    assert first["content"] == '{"found": [1, 2]}', "a result without a note is sent as before"
    assert second["content"] == [
        {"type": "text", "text": '{"refunded": false}'},
        {
            "type": "text",
            "text": "The answer to 'approve' came with a reason from U1: wrong amount",
        },
    ]


async def test_user_text_after_tool_results_joins_their_message(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("Noted.")))
    transcript = (*tool_exchange(), UserMessage(turn_id="turn-2", text="never mind"))

    await collect(model, ask(*transcript))

    roles = [m["role"] for m in api.bodies[0]["messages"]]
    assert roles == ["user", "assistant", "user"]
    types = [b["type"] for b in api.bodies[0]["messages"][2]["content"]]
    assert types == ["tool_result", "tool_result", "text"]


async def test_an_empty_assistant_message_is_left_out(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("Hi again")))
    transcript = (
        UserMessage(turn_id=T, text="thanks"),
        AssistantMessage(turn_id=T, content=(), stop_reason="end_turn"),
        UserMessage(turn_id="turn-2", text="hello?"),
    )

    await collect(model, ask(*transcript))

    (message,) = api.bodies[0]["messages"]
    assert [b["text"] for b in message["content"]] == ["thanks", "hello?"]


async def test_request_settings_override_defaults_only_when_set(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")))

    await collect(model, ask(model="claude-other", max_tokens=256))
    await collect(model, ask())

    explicit, default = api.bodies
    assert (explicit["model"], explicit["max_tokens"]) == ("claude-other", 256)
    assert (default["model"], default["max_tokens"]) == ("claude-test", UNKNOWN_BUDGET)


async def test_temperature_is_not_sent_since_the_sdk_takes_none(
    api: AnthropicStandin, model: AnthropicModel, caplog: pytest.LogCaptureFixture
) -> None:
    assert "temperature" not in inspect.signature(AsyncMessages.stream).parameters
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")))

    with caplog.at_level(logging.WARNING, logger="agent.models._anthropic"):
        first = await collect(model, ask(temperature=0.2))
        await collect(model, ask(temperature=0.2))

    assert reply_of(first).content == (TextBlock(text="a"),)
    assert all("temperature" not in body for body in api.bodies)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "temperature 0.2 is not sent" in warning


# Stop reasons


@pytest.mark.parametrize(
    "stop_reason",
    [
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "refusal",
        "pause_turn",
        "model_context_window_exceeded",
        "a_reason_from_the_future",
    ],
)
async def test_a_stop_with_content_yields_the_reply(
    api: AnthropicStandin, model: AnthropicModel, stop_reason: str
) -> None:
    api.enqueue(sse_reply(Text("Partial answer"), stop_reason=stop_reason))

    reply = reply_of(await collect(model, ask()))

    assert reply.stop_reason == stop_reason
    assert reply.content == (TextBlock(text="Partial answer"),)


async def test_tool_use_stop_yields_the_calls(api: AnthropicStandin, model: AnthropicModel) -> None:
    api.enqueue(sse_reply(ToolUse("tu_1", "lookup", {"q": "x"})))

    reply = reply_of(await collect(model, ask()))

    assert reply.stop_reason == "tool_use"
    assert reply.content == (ToolCall(id="tu_1", name="lookup", input={"q": "x"}),)


async def test_a_tool_call_cut_off_at_max_tokens_fails_the_step(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    call = ToolUse("tu_1", "weather", {"city": "Paris", "days": 14}, chunk_size=24)
    api.enqueue(
        sse_reply(Text("Checking."), call, max_tokens_after=2),
        sse_reply(Text("Checking."), call, max_tokens_after=2),
    )

    events, error = await collect_until_error(model, ask(), AbnormalStopError)
    _, explicit = await collect_until_error(model, ask(max_tokens=900), AbnormalStopError)

    assert deltas(events) == ["Checking."]
    assert not any(isinstance(e, ModelReply) for e in events)
    assert str(error) == (
        f"the model's reply was cut off at max_tokens ({UNKNOWN_BUDGET}) in the middle of a "
        "tool call (weather); no call was run, since its input may be incomplete. Raise max_tokens "
        "(ANTHROPIC_MAX_TOKENS)."
    )
    assert "max_tokens (900)" in str(explicit)
    assert "(the agent's model settings)" in str(explicit)


@pytest.mark.parametrize(
    "stop_reason", ["pause_turn", "model_context_window_exceeded", "a_new_one"]
)
async def test_tool_calls_with_another_abnormal_stop_fail_the_step(
    api: AnthropicStandin, model: AnthropicModel, stop_reason: str
) -> None:
    api.enqueue(sse_reply(ToolUse("tu_1", "lookup", {"q": "x"}), stop_reason=stop_reason))

    _, error = await collect_until_error(model, ask(), AbnormalStopError)

    assert str(error) == (
        f"the model stopped ({stop_reason}) in the middle of a tool call (lookup); no call was "
        "run, since its input may be incomplete."
    )


@pytest.mark.parametrize(
    "stop_reason",
    ["max_tokens", "model_context_window_exceeded", "a_new_reason"],
)
async def test_an_abnormal_stop_with_an_empty_reply_fails_the_step(
    api: AnthropicStandin, model: AnthropicModel, stop_reason: str
) -> None:
    api.enqueue(sse_reply(stop_reason=stop_reason))

    events, error = await collect_until_error(model, ask(), AbnormalStopError)

    assert events == []
    assert stop_reason in str(error)


async def test_thinking_alone_is_an_empty_reply(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(
        sse_reply(Thinking("Hmm, long thought", "sig"), Text(" "), stop_reason="max_tokens")
    )

    events, _ = await collect_until_error(model, ask(thinking=True), AbnormalStopError)

    assert not any(isinstance(e, ModelReply) for e in events)


@pytest.mark.parametrize("stop_reason", ["end_turn", "stop_sequence"])
async def test_a_normal_stop_with_an_empty_reply_is_still_a_reply(
    api: AnthropicStandin, model: AnthropicModel, stop_reason: str
) -> None:
    api.enqueue(sse_reply(stop_reason=stop_reason))

    reply = reply_of(await collect(model, ask()))

    assert (reply.content, reply.stop_reason) == ((), stop_reason)


# Retries


async def test_overloaded_mid_stream_restarts_without_duplicate_deltas(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(
        sse_reply(Text("Hello again, friend"), fail_after=2, error_type="overloaded_error"),
        sse_reply(Text("Hello again, friend")),
    )

    events = await collect(model, ask())

    assert deltas(events) == ["Hello ", "again, ", "Hello ", "again, ", "friend"]
    restart = events[2]
    assert isinstance(restart, StreamRestart)
    assert "overloaded_error" in restart.reason
    assert segments(events) == ["Hello again, ", "Hello again, friend"]
    assert rendered(events) == "Hello again, friend"
    assert reply_of(events).content == (TextBlock(text="Hello again, friend"),)
    first, second = api.bodies
    assert first == second


async def test_http_overloaded_then_success_is_retried_by_the_sdk(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(http_error(529, "overloaded_error"), sse_reply(Text("Fine now")))

    events = await collect(model, ask())

    assert not any(isinstance(e, StreamRestart) for e in events)
    assert deltas(events) == ["Fine ", "now"]
    assert [r.headers["x-stainless-retry-count"] for r in api.requests] == ["0", "1"]


async def test_rate_limit_429_is_retried_after_the_servers_delay(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(http_error(429, "rate_limit_error", retry_after_ms=20), sse_reply(Text("ok")))

    assert reply_of(await collect(model, ask())).content == (TextBlock(text="ok"),)
    assert len(api.requests) == 2


async def test_a_break_before_any_text_needs_no_restart_marker(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("ok then"), fail_after=0), sse_reply(Text("ok then")))

    events = await collect(model, ask())

    assert not any(isinstance(e, StreamRestart) for e in events)
    assert deltas(events) == ["ok ", "then"]


async def test_a_dropped_stream_is_restarted(api: AnthropicStandin, model: AnthropicModel) -> None:
    api.enqueue(sse_reply(Text("one two three"), cut_after=1), sse_reply(Text("one two three")))

    events = await collect(model, ask())

    assert [type(e).__name__ for e in events[:2]] == ["TextDelta", "StreamRestart"]
    assert segments(events) == ["one ", "one two three"]


async def test_an_empty_stream_is_restarted(api: AnthropicStandin, model: AnthropicModel) -> None:
    api.enqueue(SseReply(events=[]), sse_reply(Text("there")))

    events = await collect(model, ask())

    assert [type(e).__name__ for e in events] == ["TextDelta", "ModelReply"]


async def test_restarts_are_bounded_by_max_retries(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(*[sse_reply(Text("again and again"), fail_after=1) for _ in range(3)])

    events, error = await collect_until_error(model, ask(), ModelError)

    assert len(api.requests) == 3
    assert [type(e).__name__ for e in events] == ["TextDelta", "StreamRestart"] * 2 + ["TextDelta"]
    assert "overloaded_error" in str(error)


async def test_http_retries_exhausted_raise_model_error(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(*[http_error(529, "overloaded_error", "Overloaded") for _ in range(3)])

    events, error = await collect_until_error(model, ask(), ModelError)

    assert events == []
    assert len(api.requests) == 3
    assert str(error) == (
        "Anthropic API error, HTTP 529 overloaded_error: Overloaded (request req_standin)"
    )


async def test_a_client_error_mid_stream_is_not_retried(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("a b c"), fail_after=1, error_type="invalid_request_error"))

    events, error = await collect_until_error(model, ask(), ModelError)

    assert deltas(events) == ["a "]
    assert len(api.requests) == 1
    assert "invalid_request_error" in str(error)


async def test_a_bad_request_fails_once_without_the_key_in_the_message(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(http_error(401, "authentication_error", "invalid x-api-key"))

    _, error = await collect_until_error(model, ask(), ModelError)

    assert len(api.requests) == 1
    assert "authentication_error" in str(error)
    assert KEY not in str(error)
    assert error.__cause__ is None
    assert error.__suppress_context__


async def test_a_malformed_request_is_refused_by_the_standin(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    orphan = AssistantMessage(
        turn_id=T, content=(ToolCall(id="tu_x", name="lookup", input={}),), stop_reason="tool_use"
    )

    _, error = await collect_until_error(
        model,
        ask(UserMessage(turn_id=T, text="hi"), orphan, UserMessage(turn_id=T, text="?")),
        ModelError,
    )

    assert "tool_use ids without tool_result" in str(error)


async def test_an_unreachable_server_is_a_model_error() -> None:
    with AnthropicStandin() as gone:
        url = gone.base_url
    model = AnthropicModel(api_key=KEY, base_url=url, max_retries=0)
    try:
        _, error = await collect_until_error(model, ask(), ModelError)
    finally:
        await model.aclose()

    assert str(error) == "the connection to the Anthropic API failed"


async def test_abandoning_a_stream_closes_it(api: AnthropicStandin, model: AnthropicModel) -> None:
    api.enqueue(sse_reply(Text("many words " * 20)), sse_reply(Text("next")))

    stream = model.stream(ask())
    assert isinstance(await anext(stream), TextDelta)
    await stream.aclose()  # type: ignore[attr-defined]

    assert deltas(await collect(model, ask())) == ["next"]


def suspended_sdk_generators() -> list[str]:
    """The SDK's and httpx's async generators still suspended mid-stream (not closed), cyclic
    garbage not yet collected included."""
    return [
        g.ag_code.co_qualname
        for g in gc.get_objects()
        if isinstance(g, types.AsyncGeneratorType)
        and g.ag_frame is not None
        and g.ag_code.co_filename.startswith(SDK_DIRS)
    ]


SDK_DIRS = tuple(
    str(Path(module.__file__ or "").parent) for module in (anthropic, httpx2, httpcore2)
)


async def test_a_stream_abandoned_mid_reply_leaves_no_generator_to_the_garbage_collector(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    """Closing the SDK's message stream closes its response but not its generators, and one of
    them is in a reference cycle with the stream: left to the cyclic collector, it was finalized
    whenever a collection ran, in a later test after this loop had closed (an "Event loop is
    closed" unraisable error naming `Response.aiter_raw`). The adapter closes them on the loop."""
    api.enqueue(sse_reply(Text("many words " * 20)))
    gc.collect()
    gc.disable()
    try:
        stream = model.stream(ask())
        assert isinstance(await anext(stream), TextDelta)
        await stream.aclose()  # type: ignore[attr-defined]
        for _ in range(200):  # the finalizers' aclose tasks, one level at a time, on the loop
            if not suspended_sdk_generators():
                break
            await asyncio.sleep(0)
        assert suspended_sdk_generators() == []
    finally:
        gc.enable()


# Thinking


async def test_thinking_is_off_by_default_and_on_when_asked(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(*[sse_reply(Text("x")) for _ in range(4)])
    adaptive = AnthropicModel(client=client, model=MANUAL_THINKING, restart_delay=0)
    budgeted = AnthropicModel(
        client=client, model=MANUAL_THINKING, thinking=True, thinking_budget=2048
    )

    await collect(adaptive, ask())
    await collect(adaptive, ask(thinking=True))
    await collect(budgeted, ask())
    await collect(budgeted, ask(thinking=False))

    off, on, manual, opted_out = api.bodies
    assert "thinking" not in off
    assert on["thinking"] == {"type": "adaptive"}
    assert manual["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "thinking" not in opted_out


async def test_thinking_blocks_are_stored_and_echoed(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(
        sse_reply(
            Thinking("The user wants the weather.", "sig-abc"),
            RedactedThinking("opaque=="),
            Text("Checking."),
            ToolUse("tu_1", "weather", {"city": "Oslo"}),
        ),
        sse_reply(Text("Cold.")),
    )
    opening = UserMessage(turn_id=T, text="weather in Oslo?")

    first = await collect(model, ask(opening, thinking=True))

    assert deltas(first) == ["Checking."]
    reply = reply_of(first)
    signature, data = sign("claude-test", "sig-abc"), sign("claude-test", "opaque==")
    assert reply.content == (
        ThinkingBlock(thinking="The user wants the weather.", signature=signature),
        RedactedThinkingBlock(data=data),
        TextBlock(text="Checking."),
        ToolCall(id="tu_1", name="weather", input={"city": "Oslo"}),
    )
    assert reply.model == "claude-test"

    stored = AssistantMessage(
        turn_id=T, content=reply.content, stop_reason=reply.stop_reason, model=reply.model
    )
    result = ToolMessage(turn_id=T, call_id="tu_1", name="weather", result={"c": -3})
    await collect(model, ask(opening, stored, result, thinking=True))

    assert api.bodies[1]["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "The user wants the weather.", "signature": signature},
        {"type": "redacted_thinking", "data": data},
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "tu_1", "name": "weather", "input": {"city": "Oslo"}},
    ]


async def test_a_thinking_budget_at_or_over_max_tokens_is_refused(client: AsyncAnthropic) -> None:
    model = AnthropicModel(
        client=client, model=MANUAL_THINKING, thinking=True, thinking_budget=1024
    )

    _, error = await collect_until_error(model, ask(max_tokens=1024), ModelError)

    assert "thinking_budget" in str(error)


# Prompt caching and usage


def breakpoints(body: dict[str, Any]) -> list[str]:
    found = [f"system.{i}" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    found += [f"tools.{i}" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    for m, message in enumerate(body["messages"]):
        found += [
            f"messages.{m}.{i}" for i, b in enumerate(message["content"]) if "cache_control" in b
        ]
    return found


async def test_cache_breakpoints_on_system_tools_and_transcript_prefix(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")), sse_reply(Text("c")))

    await collect(model, ask())
    await collect(model, ask(*tool_exchange()))
    await collect(model, ModelRequest(system="", messages=tool_exchange()[:1]))

    first, second, bare = api.bodies
    assert breakpoints(first) == ["system.0", "tools.1", "messages.0.0"]
    assert first["system"] == [{"type": "text", "text": "Be brief.", "cache_control": EPHEMERAL}]
    assert breakpoints(second) == ["system.0", "tools.1", "messages.2.1"]
    assert breakpoints(bare) == ["messages.0.0"]
    assert "system" not in bare
    assert "tools" not in bare


async def test_the_breakpoint_skips_a_trailing_thinking_block(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(sse_reply(Text("continued")))
    prefill = AssistantMessage(
        turn_id=T,
        content=(
            TextBlock(text="So far"),
            ThinkingBlock(thinking="t", signature=sign("claude-test", "s")),
        ),
        stop_reason="pause_turn",
        model="claude-test",
    )

    await collect(model, ask(UserMessage(turn_id=T, text="go"), prefill))

    assert breakpoints(api.bodies[0]) == ["system.0", "tools.1", "messages.1.0"]
    assert api.bodies[0]["messages"][1]["content"][1]["type"] == "thinking"


async def test_usage_is_recorded_per_step_and_sums_per_turn(
    api: AnthropicStandin, model: AnthropicModel
) -> None:
    api.enqueue(
        sse_reply(
            ToolUse("tu_a", "lookup", {}), input_tokens=12, output_tokens=30, cache_write=900
        ),
        sse_reply(Text("done"), input_tokens=40, output_tokens=8, cache_read=900, cache_write=35),
    )

    first = reply_of(await collect(model, ask()))
    second = reply_of(await collect(model, ask()))

    assert first.usage == Usage(input_tokens=12, output_tokens=30, cache_write_tokens=900)
    assert second.usage == Usage(
        input_tokens=40, output_tokens=8, cache_read_tokens=900, cache_write_tokens=35
    )
    assert first.usage + second.usage == Usage(
        input_tokens=52, output_tokens=38, cache_read_tokens=900, cache_write_tokens=935
    )


# Bounded context


def exchange(n: int, *, tools: bool) -> list[Message]:
    turn = f"turn-{n}"
    opening = UserMessage(turn_id=turn, text=f"question {n} " + "x" * 2000)
    if not tools:
        return [
            opening,
            AssistantMessage(
                turn_id=turn, content=(TextBlock(text=f"answer {n}"),), stop_reason="end_turn"
            ),
        ]
    calls = (
        ToolCall(id=f"tu_{n}a", name="lookup", input={}),
        ToolCall(id=f"tu_{n}b", name="lookup", input={}),
    )
    return [
        opening,
        AssistantMessage(turn_id=turn, content=calls, stop_reason="tool_use"),
        *(ToolMessage(turn_id=turn, call_id=c.id, name="lookup", result="r") for c in calls),
        AssistantMessage(
            turn_id=turn, content=(TextBlock(text=f"answer {n}"),), stop_reason="end_turn"
        ),
    ]


async def test_context_bounding_keeps_whole_exchanges(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")), sse_reply(Text("c")))
    transcript = (
        *exchange(1, tools=True),
        *exchange(2, tools=False),
        *exchange(3, tools=True),
        UserMessage(turn_id="turn-4", text="question 4 " + "x" * 2000),
        AssistantMessage(
            turn_id="turn-4",
            content=(ToolCall(id="tu_4", name="lookup", input={}),),
            stop_reason="tool_use",
        ),
        ToolMessage(turn_id="turn-4", call_id="tu_4", name="lookup", result="r"),
    )
    request = ask(*transcript)

    # The local window, as for a model the API does not compact for (the default model does).
    local = {"client": client, "context_management": "off"}
    await collect(AnthropicModel(**local, max_context_tokens=1300), request)  # type: ignore[arg-type]
    await collect(AnthropicModel(**local, max_context_tokens=10), request)  # type: ignore[arg-type]
    await collect(AnthropicModel(**local), request)  # type: ignore[arg-type]

    two, one, unbounded = (b["messages"] for b in api.bodies)
    assert two[0]["content"][0]["text"].startswith("question 3 ")
    assert [m["role"] for m in two] == ["user", "assistant"] * 3 + ["user"]
    assert one[0]["content"][0]["text"].startswith("question 4 ")
    assert len(one) == 3
    assert unbounded[0]["content"][0]["text"].startswith("question 1 ")
    assert request.messages == transcript


def test_bounding_never_opens_an_exchange_while_a_call_awaits_its_result() -> None:
    user = UserMessage(turn_id=T, text="y" * 4000)
    calling = AssistantMessage(
        turn_id=T, content=(ToolCall(id="tu_1", name="lookup", input={}),), stop_reason="tool_use"
    )
    interjection = UserMessage(turn_id="turn-2", text="z" * 4000)
    result = ToolMessage(turn_id=T, call_id="tu_1", name="lookup", result="r")
    messages: list[Message] = [user, calling, interjection, result]

    assert bound_transcript(messages, budget=10) == messages
    assert bound_transcript(messages, budget=None) is messages


# Configuration


def test_missing_key_is_a_clear_startup_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)

    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY is not set"):
        AnthropicModel.from_env()
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        AnthropicModel(api_key="  ")


async def test_configuration_is_read_from_the_environment(
    api: AnthropicStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.base_url)
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-sonnet-4-6")
    monkeypatch.setenv("ANTHROPIC_MAX_TOKENS", "2777")
    monkeypatch.setenv("ANTHROPIC_THINKING", "true")
    monkeypatch.setenv("ANTHROPIC_THINKING_BUDGET", "1500")
    monkeypatch.setenv("ANTHROPIC_EFFORT", "low")
    monkeypatch.setenv("ANTHROPIC_TIMEOUT_SECONDS", "33")
    monkeypatch.setenv("ANTHROPIC_THINKING_DISPLAY", "summarized")
    api.enqueue(sse_reply(Text("configured")))
    model = AnthropicModel.from_env()
    try:
        assert KEY not in repr(model)
        assert KEY not in repr(AnthropicSettings())
        await collect(model, ask())
    finally:
        await model.aclose()

    (sent,) = api.requests
    assert sent.credential == KEY
    assert (sent.body["model"], sent.body["max_tokens"]) == ("claude-sonnet-4-6", 2777)
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 1500}
    assert sent.body["output_config"] == {"effort": "low"}
    assert sent.headers["x-stainless-read-timeout"] == "33.0"


def test_the_older_timeout_name_is_still_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_TIMEOUT_SECONDS", raising=False)
    monkeypatch.setenv("ANTHROPIC_TIMEOUT", "12")

    assert AnthropicSettings().timeout == 12.0
    assert AnthropicSettings(timeout=5).timeout == 5.0


@pytest.mark.parametrize(
    ("budget", "max_tokens", "problem"),
    [
        (
            4096,
            4096,
            "thinking_budget (4096) must be below max_tokens (4096): thinking tokens count "
            "toward max_tokens",
        ),
        (1000, 4096, "thinking_budget (1000) must be at least 1024"),
    ],
)
def test_a_thinking_budget_the_api_refuses_fails_at_construction(
    budget: int, max_tokens: int, problem: str
) -> None:
    with pytest.raises(ModelError) as info:
        AnthropicModel(
            api_key=KEY,
            model=MANUAL_THINKING,
            thinking=True,
            thinking_budget=budget,
            max_tokens=max_tokens,
        )

    assert str(info.value) == problem


# -- cache lifetime across a wait for a person --------------------------------------------------

HOUR = {"type": "ephemeral", "ttl": "1h"}


def _breakpoints(body: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = [*body.get("tools", []), *body.get("system", [])]
    blocks += [b for m in body["messages"] for b in m["content"]]
    return [b["cache_control"] for b in blocks if "cache_control" in b]


@pytest.mark.parametrize(
    ("may_wait", "name", "long_cache", "expected"),
    [
        (True, "claude-sonnet-4-6", True, HOUR),
        (False, "claude-sonnet-4-6", True, EPHEMERAL),
        (True, "claude-sonnet-4-6", False, EPHEMERAL),
        (True, "my-gateway-alias", True, EPHEMERAL),
    ],
)
async def test_a_request_the_turn_may_wait_after_is_cached_for_an_hour(
    api: AnthropicStandin,
    client: AsyncAnthropic,
    may_wait: bool,
    name: str,
    long_cache: bool,
    expected: dict[str, str],
) -> None:
    """Every breakpoint gets the same lifetime: a 1-hour one may not follow a 5-minute one."""
    api.enqueue(sse_reply(Text("ok")))
    adapter = AnthropicModel(client=client, model=name, long_cache=long_cache, restart_delay=0)

    await collect(adapter, dataclasses.replace(ask(), may_wait=may_wait))

    assert _breakpoints(api.bodies[0]) == [expected] * 3
