"""Progress between tool calls on the newest models: `thinking.display` asked for where the
family takes it (and only there), and the thinking text streamed as `ThinkingDelta`, never as
the reply's text.

On claude-opus-5-5 and claude-fable-5-1 what the model says between tool calls arrives in
thinking blocks, empty unless the request asks for `display: "summarized"`
(https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5#text-between-tool-calls).
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
from anthropic import AsyncAnthropic

from agent import AnthropicModel, ModelSettings, TextBlock, ThinkingBlock, ToolCall, UserMessage
from agent.seams import ModelEvent, ModelReply, ModelRequest, TextDelta, ThinkingDelta, ToolSpec
from tests.support.anthropic_signatures import sign
from tests.support.anthropic_standin import (
    AnthropicStandin,
    Text,
    Thinking,
    ToolUse,
    request_problem,
    sse_reply,
)

LOOKUP = ToolSpec(name="lookup", description="Look an order up.", input_schema={"type": "object"})
NOTE = "Checking the order history first."


def ask(**settings: Any) -> ModelRequest:
    return ModelRequest(
        system="Be brief.",
        messages=(UserMessage(turn_id="t", text="where is order A-1?"),),
        tools=(LOOKUP,),
        settings=ModelSettings(**settings),
    )


async def collect(model: AnthropicModel, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in model.stream(request)]


def tool_step() -> Any:
    return sse_reply(
        Thinking(NOTE, "sig-1"), ToolUse("tu_1", "lookup", {"order": "A-1"}), output_tokens=9
    )


async def test_the_newest_family_is_asked_for_its_progress_and_streams_it(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(tool_step())
    model = AnthropicModel(client=client, model="claude-opus-5-5", restart_delay=0)

    events = await collect(model, ask())

    assert api.bodies[0]["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == NOTE
    assert not [e for e in events if isinstance(e, TextDelta)]
    reply = events[-1]
    assert isinstance(reply, ModelReply)
    # The block is kept whole (the API needs it echoed), but it is not the reply's text.
    assert reply.content == (
        ThinkingBlock(thinking=NOTE, signature=sign("claude-opus-5-5", "sig-1")),
        ToolCall(id="tu_1", name="lookup", input={"order": "A-1"}),
    )
    assert not [b for b in reply.content if isinstance(b, TextBlock)]


async def test_omitted_progress_streams_nothing_and_keeps_the_signature(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(tool_step(), tool_step())
    quiet = AnthropicModel(
        client=client, model="claude-fable-5-1", thinking_display="omitted", restart_delay=0
    )
    chatty = AnthropicModel(client=client, model="claude-fable-5-1", restart_delay=0)

    events = await collect(quiet, ask())
    overridden = await collect(chatty, ask(thinking_display="omitted"))

    # "omitted" is the family's default, so it is not sent: the API does it anyway.
    assert [b.get("thinking") for b in api.bodies] == [None, None]
    for got in (events, overridden):
        assert not [e for e in got if isinstance(e, ThinkingDelta)]
        reply = got[-1]
        assert isinstance(reply, ModelReply)
        assert reply.content[0] == ThinkingBlock(
            thinking="", signature=sign("claude-fable-5-1", "sig-1")
        )


@pytest.mark.parametrize(
    ("model", "thinking", "setting", "sent"),
    [
        # A family that takes no `display`: never sent, whatever is asked.
        ("claude-sonnet-4-5", False, None, None),
        # (thinking on without a budget: nothing it can take; at start it is an error)
        ("claude-sonnet-4-5", True, "summarized", None),
        # Claude 4.6 shows its thinking unless asked not to: sent only when it changes anything.
        ("claude-sonnet-4-6", True, "summarized", {"type": "adaptive"}),
        ("claude-sonnet-4-6", True, "omitted", {"type": "adaptive", "display": "omitted"}),
        # Claude 5 thinks by default and omits it: asked for the summary unless told otherwise;
        # thinking turned off is off (nothing to display).
        ("claude-opus-5", False, None, {"type": "disabled"}),
        ("claude-opus-5", True, None, {"type": "adaptive", "display": "summarized"}),
        ("claude-opus-5", True, "omitted", {"type": "adaptive"}),
        ("claude-opus-5", False, "omitted", {"type": "disabled"}),
        # The newest: thinks by default and omits its text unless asked.
        ("claude-opus-5-5", False, None, {"type": "adaptive", "display": "summarized"}),
        ("claude-fable-5-1", True, "summarized", {"type": "adaptive", "display": "summarized"}),
        ("claude-fable-5-1", False, "omitted", None),
    ],
)
async def test_display_is_sent_only_where_the_family_takes_it_and_it_matters(
    api: AnthropicStandin,
    client: AsyncAnthropic,
    model: str,
    thinking: bool,
    setting: str | None,
    sent: dict[str, Any] | None,
) -> None:
    api.enqueue(sse_reply(Text("ok")))
    adapter = AnthropicModel(client=client, model=model, restart_delay=0)
    settings: dict[str, Any] = {"thinking": thinking}
    if setting is not None:
        settings["thinking_display"] = setting

    await collect(adapter, ask(**settings))

    assert api.bodies[0].get("thinking") == sent


# The stand-in refuses what the API refuses (tests.support.anthropic_display).


@pytest.mark.parametrize(
    ("model", "thinking", "refusal"),
    [
        (
            "claude-sonnet-4-5",
            {"type": "enabled", "budget_tokens": 1024, "display": "summarized"},
            "display",
        ),
        (
            "claude-opus-5",
            {"type": "disabled", "display": "omitted"},
            "thinking.disabled.display: Extra inputs are not permitted",
        ),
        (
            "claude-opus-5-5",
            {"type": "adaptive", "display": "full"},
            "display: Input should be 'summarized' or 'omitted'",
        ),
    ],
)
async def test_the_standin_refuses_a_display_the_api_refuses(
    api: AnthropicStandin, client: AsyncAnthropic, model: str, thinking: Any, refusal: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        async with client.messages.stream(
            model=model,
            max_tokens=2048,
            messages=[{"role": "user", "content": "hi"}],
            thinking=thinking,
        ) as stream:
            await stream.get_final_message()

    assert refusal in str(info.value)
    assert api.pending == 0


def test_the_standin_takes_display_where_the_family_does() -> None:
    body = {
        "model": "claude-opus-5-5",
        "max_tokens": 2048,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "adaptive", "display": "summarized"},
    }
    assert request_problem(body) is None
