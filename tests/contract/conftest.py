"""Fixtures for contract tests that need a second view of the same store.

On SQL that is a second `SqlStore` opened on the same database, which has its own engine (and on
SQLite its own worker thread and connection): as close to a second process as a test gets, so a
race between the two is a real race between transactions. `MemoryStore` cannot be shared between
processes, so its second view is itself (its races are between coroutines).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agent import SessionStore
from storage import SqlStore

Reopen = Callable[[], Awaitable[SessionStore]]


@pytest.fixture
async def reopen(store: SessionStore, store_url: str | None) -> AsyncIterator[Reopen]:
    """Open the test's database again (SQL); every store opened is closed after the test."""
    opened: list[SessionStore] = []

    async def again() -> SessionStore:
        if store_url is None:
            return store
        other = await SqlStore.open(store_url)
        opened.append(other)
        return other

    yield again
    for other in opened:
        await other.close()
