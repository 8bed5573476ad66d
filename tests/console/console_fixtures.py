"""The console over real HTTP, for the API tests: a database of each kind seeded by running
real turns (`tests.console.seed`), the bot served by uvicorn on it (`tests.bot.harness`) as a
web-only process (`RUN_TURNS=false`, so the seeded queued turn stays stuck), and clients
signed in with one console token each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from agent import ScriptedModel
from bot.testing.http import local_client
from tests.bot.harness import Running
from tests.console.seed import (
    ADMIN_TOKEN,
    AGENT,
    CONSOLE_TOKENS,
    T1_TOKEN,
    T2_TOKEN,
    Seeded,
    seed,
)

BY_NAME = {"root": ADMIN_TOKEN, "ana": T1_TOKEN, "bob": T2_TOKEN}
"""root: every workspace; ana: T1 only; bob: T2 only."""


@dataclass
class Console:
    bot: Running
    seeded: Seeded
    url: str
    db_url: str
    opened: list[httpx.AsyncClient] = field(default_factory=list)

    def client(self, **options: Any) -> httpx.AsyncClient:
        made = local_client(base_url=self.url, timeout=httpx.Timeout(30.0), **options)
        self.opened.append(made)
        return made

    async def login(self, who: str) -> Operator:
        """A client signed in as `who`, with its CSRF token."""
        client = self.client()
        answer = await client.post("/console/login", data={"token": BY_NAME[who]})
        assert answer.status_code == 303, answer.text
        me = await client.get("/console/api/me")
        assert me.status_code == 200, me.text
        return Operator(client=client, csrf=me.json()["csrf"], name=who)


@dataclass
class Operator:
    client: httpx.AsyncClient
    csrf: str
    name: str

    async def get(self, path: str, **options: Any) -> httpx.Response:
        return await self.client.get(path, **options)

    async def post(self, path: str, body: Any, **headers: str) -> httpx.Response:
        return await self.client.post(
            path, json=body, headers={"X-Console-CSRF": self.csrf, **headers}
        )


@pytest.fixture
async def console(db_url: str, launch: Callable[..., Awaitable[Running]]) -> AsyncIterator[Console]:
    seeded = await seed(db_url)
    bot = await launch(
        db_url, AGENT, ScriptedModel(), CONSOLE_TOKENS=CONSOLE_TOKENS, RUN_TURNS=False
    )
    served = Console(bot=bot, seeded=seeded, url=bot.server.url, db_url=db_url)
    try:
        yield served
    finally:
        for client in served.opened:
            await client.aclose()
