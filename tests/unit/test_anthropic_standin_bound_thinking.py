"""The stand-in's thinking signatures and its refusal and pause stops.

It signs each thinking block for the model it answered as, and refuses a request that carries a
block another model signed (or no model it knows) where the family binds thinking to its model
(https://platform.claude.com/docs/en/build-with-claude/preserved-thinking). A refusal ends the
stream with `stop_details` on the `message_delta`, a pause with `pause_turn`, as documented
(https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals,
https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic

from tests.support.anthropic_signatures import sign, signer
from tests.support.anthropic_standin import AnthropicStandin, Text, Thinking, sse_reply

KEY = "sk-ant-test-bound-thinking"
BOUND, OTHER_BOUND, LEGACY = "claude-opus-5-5", "claude-fable-5-1", "claude-sonnet-4-6"


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
    yield client
    await client.close()


def body_with_thinking(model: str, signature: str) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 1000,
        "stream": True,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": signature},
                    {"type": "text", "text": "Hello."},
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
        ],
    }


def post(api: AnthropicStandin, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{api.base_url}/v1/messages", json=body, headers={"x-api-key": KEY})


async def test_each_thinking_block_is_signed_for_the_model_that_answered(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Thinking("hm", "n1"), Text("Hello.")))

    async with client.messages.stream(
        model=BOUND, max_tokens=1000, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = await stream.get_final_message()

    block = message.content[0]
    assert block.type == "thinking"
    assert signer(block.signature) == BOUND
    assert "n1" not in block.signature, "opaque, as the API's signatures are"


@pytest.mark.parametrize(
    "signature", [sign(OTHER_BOUND, "n1"), sign(LEGACY, "n1"), "sig-made-up"], ids=str
)
def test_a_bound_model_refuses_a_block_it_did_not_sign(
    api: AnthropicStandin, signature: str
) -> None:
    api.enqueue(sse_reply(Text("never sent")))

    response = post(api, body_with_thinking(BOUND, signature))

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith(
        "messages.1.content.0: Invalid `signature` in `thinking` block."
    )
    assert api.pending == 1, "nothing was answered"


def test_its_own_block_and_any_block_for_a_family_that_does_not_bind_are_taken(
    api: AnthropicStandin,
) -> None:
    api.enqueue(sse_reply(Text("ok")), sse_reply(Text("ok")))

    own = post(api, body_with_thinking(BOUND, sign(BOUND, "n1")))
    legacy = post(api, body_with_thinking(LEGACY, sign(BOUND, "n1")))

    assert (own.status_code, legacy.status_code) == (200, 200)


async def test_a_refusal_carries_its_stop_details(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    why = "This request was declined because it could enable cyber harm."
    api.enqueue(sse_reply(Text("Hello.."), stop_reason="refusal", refusal=why))

    async with client.messages.stream(
        model=LEGACY, max_tokens=1000, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = await stream.get_final_message()

    assert message.stop_reason == "refusal"
    assert message.stop_details is not None
    assert (message.stop_details.type, message.stop_details.explanation) == ("refusal", why)
    assert [b.type for b in message.content] == ["text"]


async def test_a_pause_ends_the_stream_with_pause_turn(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("Working"), stop_reason="pause_turn"))

    async with client.messages.stream(
        model=LEGACY, max_tokens=1000, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        message = await stream.get_final_message()

    assert (message.stop_reason, message.stop_details) == ("pause_turn", None)
