"""Revision 0013 (reminders and escalation beside expiries in `approval_timers`) on SQLite and
PostgreSQL: a timer written before it reads back as the expiry it was, the new unique key allows
one timer of each action per request, and the downgrade removes exactly what it added (SQLite
rebuilds the table for the constraint; its rows are copied as they are)."""

from __future__ import annotations

import asyncio

from sqlalchemy import create_engine, text

from agent.seams import TimerAction, TimerKind
from storage import SqlStore, current_revision, upgrade_database
from storage.migrate import head_revision
from storage.sql.dialects import dialect_for
from tests.contract.test_sql_store import _columns, _migrate, empty_postgres_url, unmigrated_url

# The fixtures, used by name: a never-migrated database, SQLite and PostgreSQL.
__all__ = ["empty_postgres_url", "unmigrated_url"]


def _insert_timer(url: str) -> None:
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.begin() as conn:
            conn.execute(
                text(
                    "insert into approval_timers (session_key, kind, turn_id, request_id, due_at, "
                    "expires_after, created_at) values ('s', 'input', 't', 'ok', 500, 400, 100)"
                )
            )
    finally:
        engine.dispose()


async def test_revision_0013_keeps_older_timers_as_expiries(unmigrated_url: str) -> None:
    url = unmigrated_url
    await asyncio.to_thread(_migrate, url, "0012")
    await asyncio.to_thread(_insert_timer, url)

    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        [timer] = await store.due_timers(1_000.0)
        assert (timer.kind, timer.request_id, timer.due_at) == (TimerKind.INPUT, "ok", 500.0)
        assert (timer.action, timer.answerers, timer.fired_at) == (TimerAction.EXPIRE, None, None)
    finally:
        await store.close()

    await asyncio.to_thread(_migrate, url, "0012", down=True)
    added = {"action", "answerers", "fired_at"}
    assert added & await asyncio.to_thread(_columns, url, "approval_timers") == set()
    assert await current_revision(url) == "0012"
    await upgrade_database(url)  # and up again, the row still there
    assert await current_revision(url) == head_revision()
    store = await SqlStore.open(url)
    try:
        assert [t.request_id for t in await store.due_timers(1_000.0)] == ["ok"]
    finally:
        await store.close()
