"""The adapter across a model change, a refusal and a paused turn, through the real SDK over HTTP.

Thinking is bound to the model that wrote it on the families that bind it: the stand-in signs
each block for the model it answered as and refuses a request that carries another model's
(`tests.support.anthropic_signatures`). So a request the API would have refused fails here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anthropic import AsyncAnthropic

from agent import (
    AnthropicModel,
    AssistantMessage,
    Message,
    ModelSettings,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from agent._messages import RedactedThinkingBlock
from agent.models._anthropic_request import message_params
from agent.seams import ModelEvent, ModelReply, ModelRequest, ToolSpec
from tests.support.anthropic_signatures import sign
from tests.support.anthropic_standin import AnthropicStandin, Text, Thinking, ToolUse, sse_reply

OLD = "claude-opus-5-5"
NEW = "claude-fable-5-2"
"""Two models of the family that binds thinking to the model."""
LEGACY = "claude-sonnet-4-6"
"""A family that does not."""
TOOLS = (ToolSpec(name="lookup", description="Look up.", input_schema={"type": "object"}),)


def model_for(client: AsyncAnthropic, name: str) -> AnthropicModel:
    return AnthropicModel(client=client, model=name, restart_delay=0)


async def reply(model: AnthropicModel, *messages: Message) -> ModelReply:
    request = ModelRequest(
        system="Be brief.", messages=messages, tools=TOOLS, settings=ModelSettings()
    )
    events: list[ModelEvent] = [e async for e in model.stream(request)]
    last = events[-1]
    assert isinstance(last, ModelReply)
    return last


def thinking_in(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        b
        for m in body["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b["type"] in ("thinking", "redacted_thinking")
    ]


async def tool_step_by(
    api: AnthropicStandin, client: AsyncAnthropic, name: str
) -> tuple[UserMessage, AssistantMessage, ToolMessage]:
    """`name` thinks, says something and calls a tool; the exchange as the engine stores it."""
    api.enqueue(
        sse_reply(Thinking("Look it up.", "n1"), Text("Looking."), ToolUse("tu_1", "lookup", {}))
    )
    opening = UserMessage(turn_id="T1", text="look 42")
    got = await reply(model_for(client, name), opening)
    stored = AssistantMessage(
        turn_id="T1", content=got.content, stop_reason=got.stop_reason, model=got.model
    )
    result = ToolMessage(turn_id="T1", call_id="tu_1", name="lookup", result={"ok": True})
    return opening, stored, result


async def test_a_reply_names_the_model_that_wrote_it_and_its_thinking_is_signed_by_it(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    _, stored, _ = await tool_step_by(api, client, OLD)

    assert stored.model == OLD
    thinking = stored.content[0]
    assert isinstance(thinking, ThinkingBlock)
    assert thinking.signature == sign(OLD, "n1")


async def test_a_new_model_mid_tool_batch_is_sent_none_of_the_old_models_thinking(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    exchange = await tool_step_by(api, client, OLD)
    api.enqueue(sse_reply(Text("Found it.")), sse_reply(Text("Found it.")))

    after = await reply(model_for(client, NEW), *exchange)
    same = await reply(model_for(client, OLD), *exchange)

    assert (after.stop_reason, after.model, same.model) == ("end_turn", NEW, OLD)
    to_new, to_old = api.bodies[1], api.bodies[2]
    assert thinking_in(to_new) == []
    assert to_new["messages"][1]["content"] == [
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "tu_1", "name": "lookup", "input": {}},
    ]
    assert thinking_in(to_old) == [
        {"type": "thinking", "thinking": "Look it up.", "signature": sign(OLD, "n1")}
    ], "the model that wrote it still gets its own thinking back"


async def test_thinking_of_unknown_origin_is_not_sent_to_a_model_that_binds_it(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """A message stored before messages named their model: its writer cannot be told."""
    stored = AssistantMessage(
        turn_id="T1",
        content=(
            ThinkingBlock(thinking="hm", signature=sign(OLD, "x")),
            RedactedThinkingBlock(data=sign(OLD, "y")),
            TextBlock(text="Earlier answer."),
        ),
        stop_reason="end_turn",
    )
    api.enqueue(sse_reply(Text("ok")))

    await reply(
        model_for(client, OLD),
        UserMessage(turn_id="T1", text="hi"),
        stored,
        UserMessage(turn_id="T2", text="again"),
    )

    assert thinking_in(api.bodies[0]) == []


async def test_a_family_that_does_not_bind_thinking_gets_it_as_stored(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    exchange = await tool_step_by(api, client, OLD)
    api.enqueue(sse_reply(Text("Found it.")))

    await reply(model_for(client, LEGACY), *exchange)

    assert [b["signature"] for b in thinking_in(api.bodies[1])] == [sign(OLD, "n1")]


# Refusals and pauses


async def test_a_refusal_is_a_reply_with_its_explanation_and_no_tool_calls(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    why = "This request was declined because it could enable cyber harm."
    api.enqueue(
        sse_reply(
            Text("Hello.."), ToolUse("tu_1", "lookup", {}), stop_reason="refusal", refusal=why
        ),
        sse_reply(stop_reason="refusal"),
    )
    model = model_for(client, LEGACY)

    partial = await reply(model, UserMessage(turn_id="T1", text="bad"))
    empty = await reply(model, UserMessage(turn_id="T1", text="bad"))

    assert (partial.stop_reason, partial.stop_explanation) == ("refusal", why)
    assert partial.content == (TextBlock(text="Hello.."),), "no call of a refusal may run"
    assert (empty.stop_reason, empty.content, empty.stop_explanation) == ("refusal", (), None)


async def test_a_paused_turn_is_a_reply_even_when_empty(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(
        sse_reply(stop_reason="pause_turn"), sse_reply(Text("Part"), stop_reason="pause_turn")
    )
    model = model_for(client, LEGACY)

    empty = await reply(model, UserMessage(turn_id="T1", text="long job"))
    some = await reply(model, UserMessage(turn_id="T1", text="long job"))

    assert (empty.stop_reason, empty.content) == ("pause_turn", ())
    assert (some.stop_reason, some.content) == ("pause_turn", (TextBlock(text="Part"),))


def refused_session() -> Sequence[Message]:
    return [
        UserMessage(turn_id="T1", text="hello"),
        AssistantMessage(turn_id="T1", content=(TextBlock(text="Hi!"),), stop_reason="end_turn"),
        UserMessage(turn_id="T2", text="something refused"),
        AssistantMessage(
            turn_id="T2",
            content=(ToolCall(id="tu_9", name="lookup", input={}),),
            stop_reason="tool_use",
        ),
        ToolMessage(turn_id="T2", call_id="tu_9", name="lookup", result={"ok": True}),
        AssistantMessage(
            turn_id="T2", content=(TextBlock(text="Sure, the"),), stop_reason="refusal"
        ),
        UserMessage(turn_id="T3", text="what's the weather?"),
    ]


def test_a_refused_turn_is_left_out_of_every_later_request_whole() -> None:
    sent = message_params(refused_session(), model=LEGACY)

    assert [(m["role"], [b.get("text", b["type"]) for b in m["content"]]) for m in sent] == [
        ("user", ["hello"]),
        ("assistant", ["Hi!"]),
        ("user", ["what's the weather?"]),
    ]
