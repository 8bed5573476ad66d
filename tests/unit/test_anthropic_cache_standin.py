"""The stand-in's prompt cache keeps Anthropic's rules: the ttl values it takes, the order of
lifetimes, expiry on its own clock, the minimum length, the lookback, and usage as the API
reports it. Driven through the real SDK, as the adapter drives it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic import AsyncAnthropic

from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

KEY = "sk-ant-test-cache-key"
LONG = "Policy. " + "Check the order before acting on it. " * 300  # ~2,800 tokens
FIVE = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    client = AsyncAnthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
    yield client
    await client.close()


def _body(system: dict[str, Any] | None = FIVE, *, user: str = "hi", text: str = LONG) -> Any:
    block: dict[str, Any] = {"type": "text", "text": text}
    if system is not None:
        block["cache_control"] = system
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "system": [block],
        "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
    }


async def _usage(api: AnthropicStandin, client: AsyncAnthropic, body: Any) -> anthropic.types.Usage:
    api.enqueue(sse_reply(Text("ok")))
    async with client.messages.stream(**body) as stream:
        message = await stream.get_final_message()
    return message.usage


def _refusal(api: AnthropicStandin, body: dict[str, Any]) -> str:
    response = httpx.post(
        f"{api.base_url}/v1/messages", json={**body, "stream": True}, headers={"x-api-key": KEY}
    )
    assert response.status_code == 400
    message: str = response.json()["error"]["message"]
    return message


@pytest.mark.parametrize(
    ("control", "refused"),
    [
        (
            {"type": "ephemeral", "ttl": "2h"},
            "system.0.cache_control.ttl: Input should be '5m' or '1h'",
        ),
        (
            {"type": "ephemeral", "ttl": 3600},
            "system.0.cache_control.ttl: Input should be '5m' or '1h'",
        ),
        ({"type": "persistent"}, "system.0.cache_control.type: Input should be 'ephemeral'"),
        ({"type": "ephemeral", "scope": "org"}, "system.0.cache_control.scope: Extra inputs"),
    ],
)
def test_a_breakpoint_the_api_does_not_take_is_a_400(
    api: AnthropicStandin, control: dict[str, Any], refused: str
) -> None:
    assert _refusal(api, _body(control)).startswith(refused)
    assert api.pending == 0


def test_a_one_hour_breakpoint_may_not_follow_a_five_minute_one(api: AnthropicStandin) -> None:
    body = _body(FIVE)
    body["messages"][0]["content"][0]["cache_control"] = HOUR
    assert "must not come after a ttl='5m' one" in _refusal(api, body)
    body["cache_control"] = HOUR  # the request's own (automatic) breakpoint comes last
    body["messages"][0]["content"][0].pop("cache_control")
    assert "must not come after" in _refusal(api, body)

    api.enqueue(sse_reply(Text("ok")))
    longer_first = _body(HOUR)
    longer_first["messages"][0]["content"][0]["cache_control"] = FIVE
    ok = httpx.post(
        f"{api.base_url}/v1/messages",
        json={**longer_first, "stream": True},
        headers={"x-api-key": KEY},
    )
    assert ok.status_code == 200


async def test_a_five_minute_entry_is_read_within_its_lifetime_and_gone_after_it(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    written = await _usage(api, client, _body(FIVE))
    assert written.cache_read_input_tokens == 0
    assert (written.cache_creation_input_tokens or 0) > 1024
    assert written.cache_creation is not None
    assert written.cache_creation.ephemeral_5m_input_tokens == written.cache_creation_input_tokens
    assert written.cache_creation.ephemeral_1h_input_tokens == 0

    api.advance(299)
    read = await _usage(api, client, _body(FIVE, user="and now?"))
    assert read.cache_read_input_tokens == written.cache_creation_input_tokens
    assert read.cache_creation_input_tokens == 0

    api.advance(299)  # the read refreshed it: 598 s after the write, 299 after the read
    assert (await _usage(api, client, _body(FIVE))).cache_read_input_tokens

    api.advance(301)
    expired = await _usage(api, client, _body(FIVE))
    assert expired.cache_read_input_tokens == 0
    assert expired.cache_creation_input_tokens == written.cache_creation_input_tokens


async def test_a_one_hour_entry_outlives_thirty_minutes_and_not_an_hour(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    written = await _usage(api, client, _body(HOUR))
    assert written.cache_creation is not None
    assert written.cache_creation.ephemeral_1h_input_tokens == written.cache_creation_input_tokens

    api.advance(30 * 60)
    assert (await _usage(api, client, _body(HOUR))).cache_read_input_tokens

    api.advance(3601)
    assert (await _usage(api, client, _body(HOUR))).cache_read_input_tokens == 0


async def test_a_prefix_below_the_models_minimum_is_neither_read_nor_written(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    for _ in range(2):
        usage = await _usage(api, client, _body(FIVE, text="Be brief."))
        assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


async def test_without_breakpoints_usage_still_reports_zero_cache_tokens(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    usage = await _usage(api, client, _body(None))
    assert (usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (0, 0)


async def test_a_later_breakpoint_reads_an_earlier_prefix_within_the_lookback(
    api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    """The next step of a conversation: its breakpoint moved to its new last block, and the
    prefix the previous step wrote is found by looking back from there."""
    first = _body(None)
    first["messages"][0]["content"][0]["cache_control"] = FIVE
    written = await _usage(api, client, first)
    second = _body(None)
    second["messages"] += [
        {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
        {"role": "user", "content": [{"type": "text", "text": "more", "cache_control": FIVE}]},
    ]
    read = await _usage(api, client, second)
    assert read.cache_read_input_tokens == written.cache_creation_input_tokens
    assert 0 < (read.cache_creation_input_tokens or 0) < 100
    other_model = {**second, "model": "claude-test"}
    assert (await _usage(api, client, other_model)).cache_read_input_tokens == 0, "per model"
