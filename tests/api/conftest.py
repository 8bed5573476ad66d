"""The API over real HTTP: the bot served by uvicorn (`tests.bot.harness`), a database of each
kind, and clients holding one bearer token each. Every answer is checked against the served
OpenAPI description (`tests.api.contract`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from bot.testing.http import local_client
from tests.api.contract import Contract
from tests.bot.conftest import (  # noqa: F401  (fixtures, shared with the Slack tests)
    _loop_never_blocked,
    bots,
    db_url,
    launch,
    picked_db_url,
    serving,
    standin,
)
from tests.bot.harness import Running

TEAM = "T0DEMO"
ALICE, BOB, BOSS = "U0ALICE", "U0BOB", "U0BOSS"
TOKENS = {
    "alice-token-0123456789": {"team": TEAM, "user": ALICE},
    "bob-token-0123456789ab": {"team": TEAM, "user": BOB},
    "boss-token-0123456789a": {"team": TEAM, "user": BOSS},
    # The same user id in another workspace: another person, another tenant.
    "eve-token-0123456789ab": {"team": "T0OTHER", "user": ALICE},
}
BY_USER = {
    "alice": "alice-token-0123456789",
    "bob": "bob-token-0123456789ab",
    "boss": "boss-token-0123456789a",
    "eve": "eve-token-0123456789ab",
}
API_SETTINGS: dict[str, Any] = {
    "API_TOKENS": json.dumps(TOKENS),
    "API_POLL_SECONDS": 0.1,
    "API_HEARTBEAT_SECONDS": 0.5,
    "API_TURN_WAIT_SECONDS": 30,
}

Clients = Callable[[str], httpx.AsyncClient]


def client(base_url: str, **options: Any) -> httpx.AsyncClient:
    return local_client(base_url=base_url, **options)


@pytest.fixture
def contract() -> Contract:
    return Contract()


@pytest.fixture
def api(
    launch: Callable[..., Awaitable[Running]],  # noqa: F811
) -> Callable[..., Awaitable[Running]]:
    """Start the bot with the API on (`API_TOKENS` and fast polls) in the test's serving mode."""

    async def start(url: str, agent: Any, model: Any, **extra: Any) -> Running:
        return await launch(url, agent, model, **{**API_SETTINGS, **extra})

    return start


@pytest.fixture
async def clients(contract: Contract) -> AsyncIterator[Callable[[Running, str], httpx.AsyncClient]]:
    """`clients(bot, "alice")`: a client with alice's token (`""`: no token)."""
    opened: list[httpx.AsyncClient] = []

    def make(bot: Running, who: str) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {BY_USER[who]}"} if who else {}
        made = client(
            bot.server.url,
            headers=headers,
            timeout=httpx.Timeout(30.0),
            event_hooks={"response": [contract.check]},
        )
        opened.append(made)
        return made

    try:
        yield make
    finally:
        for made in opened:
            await made.aclose()
