"""`AnthropicModel` on each model family: the same adapter code, a request each family accepts.

Every request here goes to the Anthropic stand-in, which refuses per family what the API refuses
(`tests.support.anthropic_rules`), so "accepted" below means the family's own rules passed it.
What the constructor's own model would refuse fails at construction (at start); what a request
asks of another model (an agent's own model settings) is translated and logged, never refused.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pydantic
import pytest
from anthropic import AsyncAnthropic

from agent import (
    AnthropicModel,
    AnthropicSettings,
    ModelError,
    ModelSettings,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent._messages import AssistantMessage, ThinkingBlock
from agent.models import family_of
from agent.seams import ModelEvent, ModelReply, ModelRequest, ToolSpec
from tests.support.anthropic_signatures import sign
from tests.support.anthropic_standin import AnthropicStandin, Text, Thinking, ToolUse, sse_reply

KEY = "sk-ant-test-families-key"
T = "turn-1"
LEGACY = "claude-sonnet-4-6"
CURRENT = "claude-sonnet-5-5"
REPRESENTATIVES = [
    "claude-sonnet-4-5",
    LEGACY,
    "claude-opus-4-8",
    "claude-sonnet-5",
    "claude-fable-5",
    "claude-haiku-5-5",
    CURRENT,
    "claude-opus-5-5",
    "claude-fable-5-1",
]
TOOLS = (ToolSpec(name="weather", description="Weather.", input_schema={"type": "object"}),)


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
    yield client
    await client.close()


def ask(*messages: Any, **settings: Any) -> ModelRequest:
    return ModelRequest(
        system="Be brief.",
        messages=messages or (UserMessage(turn_id=T, text="hi"),),
        tools=TOOLS,
        settings=ModelSettings(**settings),
    )


async def collect(model: AnthropicModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


@pytest.mark.parametrize("model_id", [LEGACY, CURRENT])
async def test_a_tool_round_trip_with_thinking_runs_the_same_on_old_and_new(
    api: AnthropicStandin, client: AsyncAnthropic, model_id: str
) -> None:
    api.enqueue(
        sse_reply(Thinking("Weather, then.", "sig-1"), ToolUse("tu_1", "weather", {"c": "Oslo"})),
        sse_reply(Text("Cold.")),
    )
    model = AnthropicModel(client=client, model=model_id, thinking=True, restart_delay=0)
    opening = UserMessage(turn_id=T, text="weather in Oslo?")

    first = await collect(model, ask(opening))
    reply = first[-1]
    assert isinstance(reply, ModelReply)
    assert reply.content[0] == ThinkingBlock(
        thinking="Weather, then.", signature=sign(model_id, "sig-1")
    )
    stored = AssistantMessage(turn_id=T, content=reply.content, stop_reason=reply.stop_reason)
    result = ToolMessage(turn_id=T, call_id="tu_1", name="weather", result="-3")
    second = await collect(model, ask(opening, stored, result))

    assert isinstance(second[-1], ModelReply)
    assert isinstance(reply.content[1], ToolCall)
    shown = {"display": "summarized"} if family_of(model_id).default_display == "omitted" else {}
    for sent in api.bodies:
        assert sent["thinking"] == {"type": "adaptive", **shown}  # progress asked where hidden
        assert sent["max_tokens"] == family_of(model_id).default_max_tokens
        assert "tool_choice" not in sent


@pytest.mark.parametrize("model_id", REPRESENTATIVES)
async def test_the_adapter_never_sends_tool_choice(
    api: AnthropicStandin, client: AsyncAnthropic, model_id: str
) -> None:
    """Forced tool use is a 400 from Claude Sonnet 5.5, Opus 5.5 and Fable 5.1 on: the model
    chooses its tools on every family (auto, the API's default)."""
    api.enqueue(sse_reply(ToolUse("tu_1", "weather", {})))
    model = AnthropicModel(client=client, model=model_id, restart_delay=0)

    await collect(model, ask())

    (sent,) = api.bodies
    assert sent["tools"][0]["name"] == "weather"
    assert "tool_choice" not in sent


@pytest.mark.parametrize("model_id", [LEGACY, CURRENT, "claude-opus-5-5"])
async def test_effort_reaches_output_config_and_the_agents_wins(
    api: AnthropicStandin, client: AsyncAnthropic, model_id: str
) -> None:
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")))
    model = AnthropicModel(client=client, model=model_id, effort="high", restart_delay=0)

    await collect(model, ask())
    await collect(model, ask(effort="low"))

    configured, agents = api.bodies
    assert configured["output_config"] == {"effort": "high"}
    assert agents["output_config"] == {"effort": "low"}


def test_an_unknown_effort_is_refused_in_the_agents_settings() -> None:
    with pytest.raises(pydantic.ValidationError, match="effort"):
        ModelSettings(effort="extreme")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model_id", "off"),
    [
        (LEGACY, None),
        ("claude-sonnet-5", {"type": "disabled"}),
        ("claude-haiku-5-5", {"type": "disabled"}),
        (CURRENT, {"type": "between_tools"}),
        # always on: nothing to turn off, but its progress is still asked for (the default)
        ("claude-opus-5-5", {"type": "adaptive", "display": "summarized"}),
    ],
)
async def test_thinking_off_is_the_lowest_setting_each_family_accepts(
    api: AnthropicStandin, client: AsyncAnthropic, model_id: str, off: dict[str, str] | None
) -> None:
    api.enqueue(sse_reply(Text("a")))
    model = AnthropicModel(client=client, model=model_id, restart_delay=0)

    await collect(model, ask(thinking=False))

    assert api.bodies[0].get("thinking") == off


CONSTRUCTION_PROBLEMS = {
    "budget where thinking is adaptive only": (
        {"model": "claude-opus-5-5", "thinking": True, "thinking_budget": 2048},
        "thinking_budget is not supported by claude-opus-5-5, whose thinking is adaptive: unset "
        "it and set effort (low, medium, high, xhigh, max) for how much it thinks",
    ),
    "effort where there is none": (
        {"model": "claude-sonnet-4-5", "effort": "low"},
        "effort is not supported by claude-sonnet-4-5",
    ),
    "an effort level the family lacks": (
        {"model": LEGACY, "effort": "xhigh"},
        f"effort=xhigh is not accepted by {LEGACY} (it takes low, medium, high, max)",
    ),
    "max_tokens above the model's output": (
        {"model": "claude-haiku-4-5", "max_tokens": 64_001},
        "max_tokens (64001) is above the 64000 output tokens claude-haiku-4-5 can write",
    ),
    "thinking off at an effort that forbids it": (
        {"model": CURRENT, "thinking": False, "effort": "max"},
        f"thinking=false on {CURRENT} needs effort at high or lower",
    ),
    "thinking on with neither adaptive nor a budget": (
        {"model": "claude-sonnet-4-5", "thinking": True},
        "thinking=true on claude-sonnet-4-5 needs thinking_budget",
    ),
}


@pytest.mark.parametrize(
    ("arguments", "problem"), CONSTRUCTION_PROBLEMS.values(), ids=CONSTRUCTION_PROBLEMS
)
def test_what_the_model_would_refuse_fails_at_construction(
    arguments: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ModelError) as info:
        AnthropicModel(api_key=KEY, **arguments)

    assert str(info.value).startswith(problem)


async def test_thinking_off_on_an_always_thinking_model_is_one_warning_at_start(
    api: AnthropicStandin, caplog: pytest.LogCaptureFixture
) -> None:
    settings = AnthropicSettings(
        api_key=KEY, base_url=api.base_url, model="claude-opus-5-5", thinking=False
    )
    api.enqueue(sse_reply(Text("a")), sse_reply(Text("b")))

    with caplog.at_level(logging.WARNING):
        model = AnthropicModel.from_settings(settings)
        try:
            await collect(model, ask())
            await collect(model, ask())
        finally:
            await model.aclose()

    assert caplog.messages == [
        "ANTHROPIC_THINKING=false has no effect on claude-opus-5-5: its thinking is always on "
        "(set ANTHROPIC_EFFORT=low for the least of it)"
    ]
    # Nothing turns it off (never "disabled"); the progress display is asked for, as by default.
    assert all(
        sent["thinking"] == {"type": "adaptive", "display": "summarized"} for sent in api.bodies
    )


async def test_a_request_for_another_model_is_translated_never_refused(
    api: AnthropicStandin, client: AsyncAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    """An agent's own model settings may name a model the environment's settings do not fit:
    what that model refuses is left out (said once in the log), the turn still runs."""
    api.enqueue(*(sse_reply(Text("ok")) for _ in range(4)))
    model = AnthropicModel(
        client=client,
        model=LEGACY,
        thinking=True,
        thinking_budget=2048,
        effort="max",
        restart_delay=0,
    )

    with caplog.at_level(logging.WARNING):
        await collect(model, ask(model="claude-opus-5-5"))
        await collect(model, ask(model="claude-opus-5-5"))
        await collect(model, ask(model="claude-sonnet-4-5"))
        await collect(model, ask(model="claude-haiku-4-5", max_tokens=100_000))

    newest, again, oldest, capped = api.bodies
    assert newest["thinking"] == again["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert newest["output_config"] == {"effort": "max"}
    assert oldest["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert "output_config" not in oldest
    assert capped["max_tokens"] == 64_000
    assert caplog.messages == [
        "thinking_budget is not sent: claude-opus-5-5 takes no manual budget (its thinking is "
        "adaptive; effort sets how much)",
        "effort max is not sent: claude-sonnet-4-5 does not take it",
        "max_tokens 100000 is above the 64000 output tokens claude-haiku-4-5 can write: 64000 "
        "is sent",
        "effort max is not sent: claude-haiku-4-5 does not take it",
    ]


async def test_thinking_on_for_a_model_that_needs_a_budget_is_left_off_with_a_warning(
    api: AnthropicStandin, client: AsyncAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    api.enqueue(sse_reply(Text("ok")))
    model = AnthropicModel(client=client, model=CURRENT, thinking=True, restart_delay=0)

    with caplog.at_level(logging.WARNING):
        await collect(model, ask(model="claude-sonnet-4-5"))

    assert "thinking" not in api.bodies[0]
    assert caplog.messages == ["thinking is not sent: claude-sonnet-4-5 needs a thinking_budget"]
