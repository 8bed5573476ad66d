"""SQL-only fixtures: the engine tests that need a real transaction run on SQLite and PostgreSQL.

Tables that test tools create through the store handle are dropped too, so a count of their rows
belongs to one test alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from storage import SqlStore
from tests.support.loop_watch import LoopWatch

TOOL_TABLES = ("test_orders", "rollback_probe", "demo_orders")


@pytest.fixture(autouse=True)
def _loop_never_blocked(loop_watch: LoopWatch) -> LoopWatch:
    """The engine's turns, leases and sinks share one loop: a test that blocks it fails."""
    return loop_watch


async def _drop_tool_tables(url: str) -> None:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            for table in TOOL_TABLES:
                await conn.execute(text(f"drop table if exists {table}"))
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_database(request: pytest.FixtureRequest) -> str:
    """Picked lazily by a sync fixture, so the database's setup runs off the test's loop."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
async def sql_url(sql_database: str) -> str:
    await _drop_tool_tables(sql_database)
    return sql_database


@pytest.fixture
async def sql_store(sql_url: str) -> AsyncIterator[SqlStore]:
    store = await SqlStore.open(sql_url)
    try:
        yield store
    finally:
        await store.close()
