"""What a metrics scrape reads from the database: the backlog a chart should show.

Four small aggregate queries in one read transaction, each on an indexed status column
(`ix_turns_status_created` for the queued turns and the oldest one; the others have a status
index of their own). A scrape runs them at most every couple of
seconds (the bot caches the answer), so their cost stays flat however often Prometheus asks.

Ages are measured from `created_at`, by the database rows' own clock (the writer's `time.time()`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.engine import Connection

from agent.seams import ConfirmationStatus, ReceiptStatus, SessionStatus, TurnStatus
from storage.migrate import verify_schema
from storage.sql.schema import confirmations, receipts, sessions, turns
from storage.sql.store import SqlStore


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreGauges:
    parked_requests: int
    """Approval requests waiting for an answer (pending confirmations; the turn that proposed
    the write has ended, the write waits)."""
    oldest_parked_at: float | None
    parked_sessions: int
    """Sessions parked on a question to a person (`ctx.request_input`): the turn waits."""
    oldest_session_parked_at: float | None
    """The longest-parked session's last change (when it parked)."""
    uncertain_receipts: int
    """Effects that may or may not have happened: a person must settle each."""
    queued_turns: int
    oldest_queued_at: float | None
    read_at: float

    def age(self, since: float | None) -> float:
        return 0.0 if since is None else max(self.read_at - since, 0.0)


def read_gauges(conn: Connection) -> StoreGauges:
    parked = conn.execute(
        select(func.count(), func.min(confirmations.c.created_at)).where(
            confirmations.c.status == ConfirmationStatus.PENDING.value
        )
    ).one()
    queued = conn.execute(
        select(func.count(), func.min(turns.c.created_at)).where(
            turns.c.status == TurnStatus.QUEUED.value
        )
    ).one()
    parked_sessions = conn.execute(
        select(func.count(), func.min(sessions.c.updated_at)).where(
            sessions.c.status == SessionStatus.SUSPENDED.value
        )
    ).one()
    uncertain = conn.execute(
        select(func.count()).where(receipts.c.status == ReceiptStatus.UNCERTAIN.value)
    ).scalar_one()
    return StoreGauges(
        parked_requests=int(parked[0]),
        oldest_parked_at=None if parked[1] is None else float(parked[1]),
        parked_sessions=int(parked_sessions[0]),
        oldest_session_parked_at=None if parked_sessions[1] is None else float(parked_sessions[1]),
        uncertain_receipts=int(uncertain),
        queued_turns=int(queued[0]),
        oldest_queued_at=None if queued[1] is None else float(queued[1]),
        read_at=time.time(),
    )


async def store_gauges(store: SqlStore) -> StoreGauges:
    """The gauges, read in one transaction off the event loop (the store's executor)."""
    return await store.run_sync(read_gauges)


async def check_schema(store: SqlStore) -> None:
    """Raises `SchemaMismatchError` when the database is not at this code's newest migration
    (one upgraded or rolled back after the store opened), `StoreUnavailableError` when it does
    not answer: what `/readyz` asks."""
    await store.run_sync(verify_schema)
