"""The Anthropic stand-in as pytest fixtures: one server per module (starting it costs a thread and
a port), emptied of recorded requests and queued faults before each test, and the real SDK's
client pointed at it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from anthropic import AsyncAnthropic

from tests.support.anthropic_standin import AnthropicStandin


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as standin:
        yield standin


@pytest.fixture
def api(server: AnthropicStandin) -> AnthropicStandin:
    server.reset()
    return server


@pytest.fixture
async def client(api: AnthropicStandin) -> AsyncIterator[AsyncAnthropic]:
    """The SDK's client on the stand-in, with no retries of its own (a test that wants the SDK's
    retries makes its client). Made off the event loop: the first one imports the SDK's HTTP
    stack, which the tests' loop watch rightly counts as a block on a busy machine."""
    client = await asyncio.to_thread(
        AsyncAnthropic, base_url=api.base_url, api_key="sk-ant-standin", max_retries=0
    )
    yield client
    await client.close()
