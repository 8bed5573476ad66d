"""The Anthropic stand-in as pytest fixtures: one server per module (starting it costs a thread and
a port), emptied of recorded requests and queued faults before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.anthropic_standin import AnthropicStandin


@pytest.fixture(scope="module")
def server() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as standin:
        yield standin


@pytest.fixture
def api(server: AnthropicStandin) -> AnthropicStandin:
    server.reset()
    return server
