"""The Anthropic stand-in itself: as strict as the API version the installed SDK speaks.

A stand-in that accepts what the real API refuses proves nothing about the adapter, so these tests
pin its refusals (an unknown body field, each documented 400 it simulates) and its acceptance of
every parameter the SDK can send. The accepted set is read off the SDK, not written down here, so
upgrading the SDK moves the stand-in with it, and these tests say when a new parameter appears.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic import AsyncAnthropic
from anthropic.resources.messages import AsyncMessages
from pydantic import BaseModel

from tests.support.anthropic_standin import (
    ACCEPTED_FIELDS,
    TRANSPORT_ARGUMENTS,
    AnthropicStandin,
    Text,
    ToolUse,
    sse_reply,
)

KEY = "sk-ant-test-standin-key"
USER = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
BASE = {"model": "claude-test", "max_tokens": 4096, "messages": [USER], "stream": True}
MANUAL_THINKING = "claude-sonnet-4-5"
"""A model that still takes a manual thinking budget (`tests.support.anthropic_rules`)."""
EXTRA_NOT_PERMITTED = "Extra inputs are not permitted"


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=2)
    yield client
    await client.close()


def post(api: AnthropicStandin, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api.base_url}/v1/messages", json=body, headers={"x-api-key": KEY})


def sdk_arguments(method: Any) -> set[str]:
    return set(inspect.signature(method).parameters) - {"self"} - TRANSPORT_ARGUMENTS


def refusal(response: httpx.Response) -> str:
    """The message of an `invalid_request_error`, after checking the envelope is the API's."""
    assert response.status_code == 400
    body = response.json()
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert response.headers["x-should-retry"] == "false"
    message: str = body["error"]["message"]
    return message


def test_the_accepted_fields_are_the_sdks_create_parameters() -> None:
    assert sdk_arguments(AsyncMessages.create) == ACCEPTED_FIELDS
    assert {"model", "max_tokens", "messages", "stream", "system", "thinking"} <= ACCEPTED_FIELDS
    assert not {"extra_body", "extra_headers", "timeout", "self"} & ACCEPTED_FIELDS


@pytest.mark.parametrize("field", ["temperature", "top_p", "top_k", "not_a_parameter"])
def test_a_body_field_the_sdk_does_not_take_is_refused(api: AnthropicStandin, field: str) -> None:
    assert field not in ACCEPTED_FIELDS
    api.enqueue(sse_reply(Text("never sent")))

    response = post(api, {**BASE, field: 0.5})

    assert response.json() == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": f"{field}: {EXTRA_NOT_PERMITTED}",
        },
        "request_id": "req_standin",
    }
    assert response.status_code == 400
    assert api.pending == 1


async def test_an_extra_body_field_sent_through_the_sdk_fails_once(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        async with client.messages.stream(
            model="claude-test",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"temperature": 0.2},
        ) as stream:
            await stream.get_final_message()

    assert info.value.api_message == f"temperature: {EXTRA_NOT_PERMITTED}"
    assert len(api.requests) == 1


async def test_every_create_parameter_is_accepted(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    arguments: dict[str, Any] = {
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
        # The one family that takes both a manual budget and effort.
        "model": "claude-sonnet-4-6",
        "cache_control": {"type": "ephemeral"},
        "container": "container_1",
        "diagnostics": {"previous_message_id": None},
        "inference_geo": "us",
        "metadata": {"user_id": "u-1"},
        "output_config": {"effort": "low"},
        "service_tier": "auto",
        "speed": "standard",
        "stop_sequences": ["STOP"],
        "stream": True,
        "system": [{"type": "text", "text": "Be brief."}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
        "tool_choice": {"type": "auto"},
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        "user_profile_id": "up_1",
        "workspace_id": "wrkspc_1",
    }
    # A parameter new in the SDK shows up here first: give it a value above.
    assert set(arguments) == sdk_arguments(AsyncMessages.create)
    api.enqueue(sse_reply(Text("ok")))

    stream = await client.messages.create(**arguments)
    async for _ in stream:
        pass

    (sent,) = api.requests
    assert set(sent.body) <= ACCEPTED_FIELDS
    assert sent.body["thinking"] == arguments["thinking"]


class Answer(BaseModel):
    a: int


async def test_every_stream_parameter_is_accepted(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    arguments: dict[str, Any] = {
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": "hi"}],
        "model": "claude-test",
        "cache_control": {"type": "ephemeral"},
        "container": "container_1",
        "diagnostics": {"previous_message_id": None},
        "inference_geo": "us",
        "metadata": {"user_id": "u-1"},
        "output_config": {"effort": "low"},
        "output_format": Answer,
        "service_tier": "auto",
        "speed": "standard",
        "stop_sequences": ["STOP"],
        "system": "Be brief.",
        "thinking": {"type": "adaptive"},
        "tool_choice": {"type": "auto"},
        "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
        "user_profile_id": "up_1",
        "workspace_id": "wrkspc_1",
    }
    assert set(arguments) == sdk_arguments(AsyncMessages.stream)
    api.enqueue(sse_reply(Text('{"a": 1}')))

    async with client.messages.stream(**arguments) as stream:
        message = await stream.get_final_message()

    assert message.parsed_output == Answer(a=1)
    (sent,) = api.requests
    assert set(sent.body) <= ACCEPTED_FIELDS
    assert sent.body["output_config"]["effort"] == "low"
    assert "format" in sent.body["output_config"]


def tool_use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "lookup", "input": {}}


def tool_result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "r"}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


EPHEMERAL = {"cache_control": {"type": "ephemeral"}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"max_tokens": None}, "max_tokens: Field required"),
        ({"model": None}, "model: Field required"),
        ({"messages": None}, "messages: Field required"),
        (
            {"messages": [{"role": "assistant", "content": [text("hi")]}]},
            "messages: first message must use the user role",
        ),
        (
            {"messages": [USER, USER]},
            "messages.1: roles must alternate (stand-in rule)",
        ),
        (
            {"messages": [{"role": "user", "content": [text("")]}]},
            "messages.0: text content blocks must be non-empty",
        ),
        (
            {"messages": [{"role": "user", "content": []}]},
            "messages.0: all messages must have non-empty content",
        ),
        (
            {
                "messages": [
                    USER,
                    {"role": "assistant", "content": [tool_use("tu_1")]},
                    {"role": "user", "content": [text("and?")]},
                ]
            },
            "messages.2: tool_use ids without tool_result blocks: ['tu_1']",
        ),
        (
            {
                "messages": [
                    USER,
                    {"role": "assistant", "content": [tool_use("tu_1")]},
                    {"role": "user", "content": [tool_result("tu_1"), tool_result("tu_2")]},
                ]
            },
            "messages.2: unexpected tool_use_id in tool_result: ['tu_2']",
        ),
        (
            {
                "messages": [
                    USER,
                    {"role": "assistant", "content": [tool_use("tu_1")]},
                    {"role": "user", "content": [text("first"), tool_result("tu_1")]},
                ]
            },
            "messages.2: tool_result blocks must come first in the user message",
        ),
        (
            {
                "messages": [
                    {"role": "user", "content": [text(f"{i}", **EPHEMERAL) for i in range(5)]}
                ]
            },
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
        (
            {"model": MANUAL_THINKING, "thinking": {"type": "enabled", "budget_tokens": 1023}},
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024",
        ),
        (
            {"model": MANUAL_THINKING, "thinking": {"type": "enabled", "budget_tokens": 4096}},
            "`max_tokens` must be greater than `thinking.budget_tokens`",
        ),
    ],
)
def test_documented_request_errors_are_refused(
    api: AnthropicStandin, change: dict[str, Any], message: str
) -> None:
    body = {k: v for k, v in {**BASE, **change}.items() if v is not None}

    assert refusal(post(api, body)).startswith(message)


def test_a_valid_thinking_budget_is_accepted(api: AnthropicStandin) -> None:
    api.enqueue(sse_reply(Text("ok")))

    thinking = {"type": "enabled", "budget_tokens": 4095}
    response = post(api, {**BASE, "model": MANUAL_THINKING, "thinking": thinking})

    assert response.status_code == 200


async def test_a_max_tokens_stop_can_cut_a_tool_call_in_half(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    refund = ToolUse("tu_1", "refund", {"order": "A-1", "amount": 1000}, chunk_size=8)
    api.enqueue(sse_reply(Text("Refunding."), refund, max_tokens_after=3))

    async with client.messages.stream(
        model="claude-test", max_tokens=100, messages=[{"role": "user", "content": "refund"}]
    ) as stream:
        message = await stream.get_final_message()

    assert message.stop_reason == "max_tokens"
    said, call = message.content
    assert said.type == "text"
    assert said.text == "Refunding."
    assert call.type == "tool_use"
    # The SDK parses the half-sent JSON leniently: an input that looks whole but is not.
    assert call.input == {"order": "A-1"}
