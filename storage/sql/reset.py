"""Transaction bodies for a session reset and for reading what it archived.

A reset runs on the turn chain like any turn (the runtime applies it when it is the oldest
unfinished turn), fenced by the worker's lease, and moves the live generation's rows into the
archive tables in one transaction: a crash leaves either the old generation live or the new one,
never half of each. Turn rows stay where they are; `turns.generation` says which one they ran in.
"""

from __future__ import annotations

from sqlalchemy import Integer, Table, delete, insert, literal, select, update
from sqlalchemy.engine import Connection, RowMapping

from agent.seams import (
    ArchivedGeneration,
    CancelReason,
    ConfirmationStatus,
    Lease,
    SessionStatus,
    StepConflictError,
    TurnKind,
    TurnStatus,
)
from storage.ledger_records import archived_generation
from storage.records import UNFINISHED_VALUES, EventRow, applied_reset, event_rows
from storage.sql.commit import fence, insert_many, stamped
from storage.sql.schema import (
    ARCHIVED,
    approval_timers,
    archived_events,
    archived_facts,
    archived_messages,
    archived_steps,
    confirmations,
    events,
    turns,
)


def apply_reset(
    conn: Connection,
    lease: Lease,
    reset_id: str,
    new_events: list[EventRow],
    ttl: float,
    now: float,
) -> tuple[int, int]:
    """Returns the archived generation and the last event seq reserved for `new_events`."""
    session = lease.session
    # The fence starts the new generation in the same UPDATE that proves the lease.
    fenced = fence(
        conn,
        lease,
        ttl,
        now,
        events=len(new_events),
        status=SessionStatus.NEW,
        set_pending=True,
        next_generation=True,
    )
    archived = int(fenced.generation) - 1
    reset = conn.execute(
        select(turns.c.id).where(
            turns.c.session_key == session,
            turns.c.turn_id == reset_id,
            turns.c.kind == TurnKind.RESET.value,
            turns.c.status.in_(UNFINISHED_VALUES),
        )
    ).scalar_one_or_none()
    if reset is None:
        raise StepConflictError(f"no queued reset {reset_id!r} on session {session!r}")
    for live, archive in ARCHIVED:
        columns = [column.name for column in live.c]
        copied = select(literal(archived, Integer), *live.c).where(live.c.session_key == session)
        conn.execute(insert(archive).from_select(["generation", *columns], copied))
        conn.execute(delete(live).where(live.c.session_key == session))
    conn.execute(
        update(turns)
        .where(turns.c.session_key == session, turns.c.status == TurnStatus.SUSPENDED.value)
        .values(
            status=TurnStatus.CANCELLED.value,
            cancel_reason=CancelReason.RESET.value,
            finished_at=now,
        )
    )
    # An approval from before the reset must never act after it.
    conn.execute(
        update(confirmations)
        .where(
            confirmations.c.session_key == session,
            confirmations.c.status == ConfirmationStatus.PENDING.value,
        )
        .values(status=ConfirmationStatus.EXPIRED.value, resolved_at=now)
    )
    # Nothing of the old generation is left to expire.
    conn.execute(delete(approval_timers).where(approval_timers.c.session_key == session))
    # Turns queued behind the reset run in the generation it starts.
    conn.execute(
        update(turns)
        .where(
            turns.c.session_key == session,
            turns.c.status.in_(UNFINISHED_VALUES),
            turns.c.id > reset,
        )
        .values(generation=archived + 1)
    )
    conn.execute(update(turns).where(turns.c.id == reset).values(applied_reset(archived, now)))
    last_seq = int(fenced.event_seq)
    insert_many(conn, events, stamped(event_rows(session, new_events, last_seq), now))
    return archived, last_seq


def read_archive(conn: Connection, session: str, generation: int) -> ArchivedGeneration:
    def rows(table: Table, order: str) -> list[RowMapping]:
        query = select(table).where(
            table.c.session_key == session, table.c.generation == generation
        )
        return list(conn.execute(query.order_by(table.c[order])).mappings())

    return archived_generation(
        session,
        generation,
        messages=rows(archived_messages, "idx"),
        steps=rows(archived_steps, "id"),
        events=rows(archived_events, "seq"),
        facts=rows(archived_facts, "id"),
    )
