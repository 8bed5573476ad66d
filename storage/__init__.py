"""Stores behind the engine's `SessionStore` seam: SQL (SQLite or PostgreSQL) and in-memory.

`storage` depends on `agent` (its seams, records and errors) and never on `bot`.
"""

from __future__ import annotations

import typing

from storage.memory.store import MemoryStore
from storage.migrate import current_revision, upgrade_database
from storage.sql.store import SqlStore

if typing.TYPE_CHECKING:
    from agent.seams import SessionStore

__all__ = [
    "MemoryStore",
    "SqlStore",
    "current_revision",
    "open_store",
    "upgrade_database",
]


async def open_store(url: str | None) -> SessionStore:
    """The store a URL names: None or "memory" for `MemoryStore`, else a migrated SQL database.

    A SQL database must already be at this code's schema revision (`bot db upgrade`); opening
    never migrates, so several processes starting at once cannot race a migration. (The return
    type is also where mypy proves that both stores satisfy the `SessionStore` Protocol.)
    """
    if url is None or url == "memory":
        return MemoryStore()
    return await SqlStore.open(url)
