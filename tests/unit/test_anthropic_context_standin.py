"""The stand-in's context-management rules (`tests.support.anthropic_context`): each refusal the
API makes, and what it does past a trigger, shown over HTTP and, where the SDK reads it, there."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from anthropic import AsyncAnthropic

from tests.support.anthropic_context import sign
from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

KEY = "sk-ant-test-key-0123456789"
NEW = "claude-opus-5-5"
OLD = "claude-sonnet-4-5"  # the Claude 4 family: a 200,000-token window, no compaction
COMPACT = {"anthropic-beta": "compact-2026-01-12"}
EDITING = {"anthropic-beta": "context-management-2025-06-27"}
COMPACT_EDIT = {"edits": [{"type": "compact_20260112"}]}


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
    yield client
    await client.close()


def post(
    api: AnthropicStandin, body: dict[str, Any], headers: dict[str, str], path: str = ""
) -> httpx.Response:
    return httpx.post(
        f"{api.base_url}/v1/messages{path}",
        json=body,
        headers={"x-api-key": KEY, **headers},
        timeout=30,
    )


def body(model: str = NEW, **fields: Any) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        **fields,
    }


def block(summary: str = "so far", **changes: Any) -> dict[str, Any]:
    return {"type": "compaction", "content": summary, "signature": sign(summary), **changes}


def thread(*assistant_blocks: dict[str, Any], role: str = "assistant") -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "first"},
        {"role": role, "content": [*assistant_blocks, {"type": "text", "text": "ok"}]},
        {"role": "user", "content": "next"},
    ]


def refused(response: httpx.Response) -> tuple[str, str | None]:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    return error["message"], (error.get("details") or {}).get("error_code")


@pytest.mark.parametrize(
    ("fields", "headers", "says"),
    [
        ({"context_management": COMPACT_EDIT}, {}, "Extra inputs are not permitted"),
        ({"context_management": COMPACT_EDIT}, EDITING, "requires the anthropic-beta header"),
        (
            {"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}},
            COMPACT,
            "requires the anthropic-beta header context-management-2025-06-27",
        ),
        (
            {
                "context_management": {
                    "edits": [
                        {
                            "type": "compact_20260112",
                            "trigger": {"type": "input_tokens", "value": 49_999},
                        }
                    ]
                }
            },
            COMPACT,
            "greater than or equal to 50000",
        ),
    ],
)
def test_context_management_needs_its_beta_and_a_valid_trigger(
    api: AnthropicStandin, fields: dict[str, Any], headers: dict[str, str], says: str
) -> None:
    message, _ = refused(post(api, body(**fields), headers))
    assert says in message


def test_an_edit_the_family_does_not_take_is_refused(api: AnthropicStandin) -> None:
    message, _ = refused(post(api, body(OLD, context_management=COMPACT_EDIT), COMPACT))
    assert "not supported on model" in message


@pytest.mark.parametrize(
    ("messages", "code"),
    [
        (thread(block(), role="user"), "compaction_block_misplaced"),
        (thread({"type": "text", "text": "before"}, block()), "compaction_block_misplaced"),
        (
            [
                *thread(block("one")),
                {"role": "assistant", "content": [block("two")]},
                {"role": "user", "content": "x"},
            ],
            "compaction_block_ambiguous",
        ),
        (thread({**block(), "content": "edited"}), "compaction_content_mismatch"),
        (thread(block(signature="forged")), "compaction_signature_invalid"),
    ],
)
def test_a_compaction_block_comes_back_as_returned_first_and_alone(
    api: AnthropicStandin, messages: list[dict[str, Any]], code: str
) -> None:
    _, got = refused(post(api, body(messages=messages, context_management=COMPACT_EDIT), COMPACT))
    assert got == code


def test_a_compaction_block_without_the_beta_is_refused(api: AnthropicStandin) -> None:
    message, _ = refused(post(api, body(messages=thread(block())), {}))
    assert "compaction" in message


def test_a_prompt_over_the_window_is_refused(api: AnthropicStandin) -> None:
    big = [{"role": "user", "content": "word " * 170_000}]  # over 200,000 tokens
    message, _ = refused(post(api, body(OLD, messages=big), {}))
    assert message.startswith("prompt is too long")


async def test_past_the_trigger_the_reply_opens_with_a_compaction_block(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(sse_reply(Text("Answer.")))
    big = "word " * 40_000
    async with client.beta.messages.stream(
        model=NEW,
        max_tokens=100,
        messages=[{"role": "user", "content": big}],
        context_management={
            "edits": [
                {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
            ]
        },
        betas=["compact-2026-01-12"],
    ) as stream:
        message = await stream.get_final_message()
    first, second = message.content
    assert first.type == "compaction"
    assert first.content is not None
    assert first.signature == sign(first.content)
    assert second.type == "text"
    assert message.stop_reason == "end_turn"


async def test_a_request_is_read_from_its_compaction_block_onward(
    api: AnthropicStandin,
) -> None:
    """What came before the block is not counted: it neither compacts again nor overflows."""
    api.enqueue(sse_reply(Text("Answer.")))
    before = [{"role": "user", "content": "word " * 200_000}]
    messages = [*before, *thread(block())[1:]]
    edits = {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
        ]
    }
    response = post(api, body(messages=messages, context_management=edits), COMPACT)
    assert response.status_code == 200
    assert '"compaction"' not in response.text


async def test_tool_clearing_reports_its_applied_edits(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    messages: list[Any] = [{"role": "user", "content": "start"}]
    for n in range(4):
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": f"c{n}", "name": "lookup", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"c{n}", "content": "r" * 400}],
            },
        ]
    api.enqueue(sse_reply(Text("Done.")))
    async with client.beta.messages.stream(
        model=OLD,
        max_tokens=100,
        messages=messages,
        context_management={
            "edits": [
                {
                    "type": "clear_tool_uses_20250919",
                    "trigger": {"type": "input_tokens", "value": 100},
                    "keep": {"type": "tool_uses", "value": 1},
                }
            ]
        },
        betas=["context-management-2025-06-27"],
    ) as stream:
        message = await stream.get_final_message()
    assert message.context_management is not None
    [applied] = message.context_management.applied_edits
    assert applied.type == "clear_tool_uses_20250919"
    assert applied.cleared_tool_uses == 3
    assert applied.cleared_input_tokens > 0


async def test_count_tokens_takes_the_sdks_count_fields(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    count = await client.messages.count_tokens(
        model=OLD, messages=[{"role": "user", "content": "word " * 400}]
    )
    assert 400 <= count.input_tokens <= 600
    message, _ = refused(
        post(api, {"model": OLD, "max_tokens": 5, "messages": []}, {}, "/count_tokens")
    )
    assert message == "max_tokens: Extra inputs are not permitted"
