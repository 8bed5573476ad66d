"""Stores behind the engine's `SessionStore` seam: SQL (SQLite or PostgreSQL) and in-memory.

`storage` depends on `agent` (its seams, records and errors) and never on `bot`.

Each name is imported on first use (the module `__getattr__` below), so a process pays only
for what it uses: a command line that opens a SQL store never imports the memory store, and
one that only reads a revision imports neither store.
"""

from __future__ import annotations

import importlib
import typing

if typing.TYPE_CHECKING:
    from agent.seams import SessionStore
    from storage.memory.store import MemoryStore
    from storage.migrate import (
        DatabaseUrlError,
        SchemaUpgrade,
        current_revision,
        require_database,
        upgrade_database,
    )
    from storage.sql.store import SqlStore

__all__ = [
    "DatabaseUrlError",
    "MemoryStore",
    "SchemaUpgrade",
    "SqlStore",
    "current_revision",
    "open_store",
    "require_database",
    "upgrade_database",
]

_HOMES = {
    "DatabaseUrlError": "storage.migrate",
    "MemoryStore": "storage.memory.store",
    "SchemaUpgrade": "storage.migrate",
    "SqlStore": "storage.sql.store",
    "current_revision": "storage.migrate",
    "require_database": "storage.migrate",
    "upgrade_database": "storage.migrate",
}
"""Where each name imported on first use lives."""


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'storage' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


async def open_store(url: str | None) -> SessionStore:
    """The store a URL names: None or "memory" for `MemoryStore`, else a migrated SQL database.

    A SQL database must already be at this code's schema revision (`bot db upgrade`); opening
    never migrates, so several processes starting at once cannot race a migration. (The return
    type is also where mypy proves that both stores satisfy the `SessionStore` Protocol.)
    """
    if url is None or url == "memory":
        from storage.memory.store import MemoryStore

        return MemoryStore()
    from storage.sql.store import SqlStore

    return await SqlStore.open(url)
