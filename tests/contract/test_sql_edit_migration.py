"""Revision 0014 (the approved arguments of an edited approval, `confirmations.
approved_arguments`) on SQLite and PostgreSQL: a proposal written before it reads back as
answered as proposed, an edited answer stores both calls, and the downgrade removes exactly the
column it added (the rows stay)."""

from __future__ import annotations

import asyncio

from sqlalchemy import create_engine, text

from agent import TurnInput
from agent.seams import ConfirmationStatus
from storage import SqlStore, current_revision, upgrade_database
from storage.migrate import head_revision
from storage.sql.dialects import dialect_for
from tests.contract.test_sql_store import _columns, _migrate, empty_postgres_url, unmigrated_url

# The fixtures, used by name: a never-migrated database, SQLite and PostgreSQL.
__all__ = ["empty_postgres_url", "unmigrated_url"]


def _insert_proposal(url: str) -> None:
    """A session and its pending proposal, as revision 0013 stored them."""
    engine = create_engine(dialect_for(url).url)
    try:
        with engine.begin() as conn:
            conn.execute(text("insert into sessions (key, status) values ('s', 'idle')"))
            conn.execute(
                text(
                    "insert into confirmations (session_key, confirmation_id, turn_id, call_id, "
                    "tool, arguments, prompt, status, created_at) values ('s', 'T1:c1', 'T1', "
                    "'c1', 'refund', '{\"amount\": 400}', 'Refund?', 'pending', 100)"
                )
            )
    finally:
        engine.dispose()


async def test_revision_0014_adds_the_approved_arguments(unmigrated_url: str) -> None:
    url = unmigrated_url
    await asyncio.to_thread(_migrate, url, "0013")
    await asyncio.to_thread(_insert_proposal, url)

    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        old = await store.get_confirmation("s", "T1:c1")
        assert old is not None
        assert (old.arguments, old.approved_arguments) == ({"amount": 400}, None)
        await store.resolve_confirmation(
            "s",
            "T1:c1",
            accepted=True,
            by="U1",
            follow_up_turn="confirm:T1:c1",
            follow_up=TurnInput(text="approved"),
            events=[],
            now=200.0,
            approved_arguments={"amount": 40},
        )
        edited = await store.get_confirmation("s", "T1:c1")
        assert edited is not None
        assert edited.status == ConfirmationStatus.ACCEPTED
        assert (edited.arguments, edited.approved_arguments) == ({"amount": 400}, {"amount": 40})
    finally:
        await store.close()

    await asyncio.to_thread(_migrate, url, "0013", down=True)
    assert "approved_arguments" not in await asyncio.to_thread(_columns, url, "confirmations")
    assert await current_revision(url) == "0013"
    await upgrade_database(url)  # and up again, the row still there (its edit is not)
    assert await current_revision(url) == head_revision()
    store = await SqlStore.open(url)
    try:
        again = await store.get_confirmation("s", "T1:c1")
        assert again is not None
        assert (again.status, again.approved_arguments) == (ConfirmationStatus.ACCEPTED, None)
    finally:
        await store.close()
