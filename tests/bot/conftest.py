"""Fixtures for the Slack surface: the stand-in, a database per test, bots stopped cleanly."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import pytest
from sqlalchemy import Table, delete

from bot.testing import SlackStandIn
from bot.testing.socket_mode import SocketModeStandIn
from storage.delivery.schema import DELIVERY_TABLES
from storage.sql.dialects import dialect_for
from tests.bot.harness import ONE_PROCESS, WEB_AND_WORKER, Running, start_bot
from tests.support.loop_watch import LoopWatch


@pytest.fixture(autouse=True)
def _loop_never_blocked(loop_watch: LoopWatch) -> LoopWatch:
    """The bot acks, renders and heartbeats on one loop: a test that blocks it fails."""
    return loop_watch


async def empty_tables(url: str, tables: Iterable[Table]) -> None:
    """Rows a previous test left in tables every test of a database shares, deleted."""
    engine = dialect_for(url).create_engine()
    try:
        async with engine.begin() as conn:
            for table in tables:
                await conn.execute(delete(table))
    finally:
        await engine.dispose()


@pytest.fixture
async def standin() -> AsyncIterator[SlackStandIn]:
    """A trigger lives 30 s here, not Slack's 3: at load 14 a Deny click took longer than three
    seconds to reach `views.open`, and the test about the Home inbox failed on the modal it
    never saw. The three seconds, and the bot's answer past them, have tests of their own
    (`test_slack_standin`, `test_deny_reason`), which set Slack's lifetime back."""
    server = await SlackStandIn().start()
    server.trigger_lifetime = 30.0
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def socket(standin: SlackStandIn) -> AsyncIterator[SocketModeStandIn]:
    """The app's Socket Mode, reached through the stand-in's `apps.connections.open`."""
    server = await SocketModeStandIn().start()
    standin.socket_mode = server
    try:
        yield server
    finally:
        standin.socket_mode = None
        await server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def picked_db_url(request: pytest.FixtureRequest) -> str:
    """The core flows run on both databases. Picked lazily by a sync fixture, so the database's
    setup runs off the test's loop."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
async def db_url(picked_db_url: str) -> str:
    await empty_tables(picked_db_url, DELIVERY_TABLES)
    return picked_db_url


@pytest.fixture
async def bots() -> AsyncIterator[list[Running]]:
    running: list[Running] = []
    try:
        yield running
    finally:
        for bot in running:
            await bot.stop()


@pytest.fixture(params=[ONE_PROCESS, WEB_AND_WORKER])
def serving(request: pytest.FixtureRequest) -> str:
    """Both ways users run the bot; a module opts in with
    `pytestmark = pytest.mark.usefixtures("serving")` (approvals, crashes, rendering)."""
    mode: str = request.param
    return mode


@pytest.fixture
def launch(
    request: pytest.FixtureRequest, standin: SlackStandIn, bots: list[Running]
) -> Callable[..., Awaitable[Running]]:
    mode = request.getfixturevalue("serving") if "serving" in request.fixturenames else ONE_PROCESS

    async def launch(url: str, agent: Any, model: Any, **kwargs: Any) -> Running:
        kwargs.setdefault("serving", mode)
        bot = await start_bot(url, standin, agent, model, **kwargs)
        bots.append(bot)
        return bot

    return launch
