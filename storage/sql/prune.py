"""Transaction bodies for retention (`SqlStore.prune_history`, `SqlStore.prune_receipts`).

A prune is many short transactions, never one long one: a read picks the next batch (turns
not pruned yet that finished before the cutoff, in queue order), then one write deletes it.
That write re-checks everything under the locks it takes, because anything may have happened
since the read: it locks the batch's session rows in key order (PostgreSQL: FOR UPDATE, the
lock every enqueue, answer and fenced commit takes first; SQLite: the database write lock
BEGIN IMMEDIATE took), then leaves alone every session that is live or parked, and every turn
that is no longer finished, old and unpruned. Two prunes running at once (two clocks) lock in
the same order, so they wait for each other instead of deadlocking, and the second finds the
first's turns already marked: nothing is deleted or counted twice.

What goes: a finished turn's steps (its memo; only a running or replayed turn reads its own)
and its events (the log a renderer and a late subscriber read, up to how far it was
delivered), and for a reset turn the generation it archived. The turn row stays, marked
`pruned_at`: it is the turn id's tombstone. The transcript (`messages`) of the live generation
is never touched: the next turn's context is read from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Table, delete, func, select, tuple_, update
from sqlalchemy.engine import Connection

from agent.seams import ConfirmationStatus, PruneCounts, SessionStatus, TurnKind
from storage.ledger_records import SETTLED_RECEIPTS
from storage.records import FINISHED_VALUES, OPEN_VALUES, reset_archived
from storage.sql.schema import (
    ARCHIVED,
    confirmations,
    events,
    receipts,
    sessions,
    steps,
    turns,
)

ARCHIVES = tuple(archive for _live, archive in ARCHIVED)
"""Every archive table, in `schema.ARCHIVED`'s order."""


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A turn the read picked; the write decides whether it still qualifies."""

    id: int
    session: str


def candidates(conn: Connection, before: float, after: int, limit: int) -> list[Candidate]:
    query = (
        select(turns.c.id, turns.c.session_key)
        .where(turns.c.pruned_at.is_(None), turns.c.id > after, turns.c.finished_at < before)
        .order_by(turns.c.id)
        .limit(limit)
    )
    return [Candidate(id=int(row.id), session=row.session_key) for row in conn.execute(query)]


def live_sessions(conn: Connection, keys: Sequence[str], *, lock: bool) -> set[str]:
    """Which of `keys` are live or parked, read under their row locks (with `lock`)."""
    rows = select(sessions.c.key, sessions.c.status, sessions.c.pending).where(
        sessions.c.key.in_(keys)
    )
    if lock:
        rows = rows.order_by(sessions.c.key).with_for_update()
    live = {
        row.key
        for row in conn.execute(rows)
        if row.status == SessionStatus.SUSPENDED.value or row.pending is not None
    }
    open_turns = select(turns.c.session_key).where(
        turns.c.session_key.in_(keys), turns.c.status.in_(OPEN_VALUES)
    )
    live.update(conn.execute(open_turns.distinct()).scalars())
    pending = select(confirmations.c.session_key).where(
        confirmations.c.status == ConfirmationStatus.PENDING.value,
        confirmations.c.session_key.in_(keys),
    )
    live.update(conn.execute(pending.distinct()).scalars())
    return live


def prune_turns(
    conn: Connection,
    picked: Sequence[Candidate],
    before: float,
    horizons: Mapping[str, int],
    dry_run: bool,
    now: float,
) -> PruneCounts:
    """The write (or, dry run, the count) for one batch `candidates` picked."""
    keys = sorted({c.session for c in picked})
    live = live_sessions(conn, keys, lock=not dry_run)
    held = sum(1 for c in picked if c.session in live)
    still = conn.execute(
        select(turns.c.id, turns.c.session_key, turns.c.turn_id, turns.c.kind, turns.c.result)
        .where(
            turns.c.id.in_([c.id for c in picked if c.session not in live]),
            turns.c.pruned_at.is_(None),
            turns.c.finished_at < before,
            turns.c.status.in_(FINISHED_VALUES),
        )
        .order_by(turns.c.id)
    ).all()
    counts = PruneCounts(held=held)
    if still:
        counts += _prune_rows(conn, still, horizons, dry_run, now)
    return counts


def _in_pairs(table: Table, pairs: Sequence[tuple[str, str]]) -> list[ColumnElement[bool]]:
    """Rows of these (session, turn id) pairs. The pair test is exact; the two plain IN lists
    beside it give the planner an index on `session_key` (a list of row values alone may be
    read as an OR no index serves, and `events` has no index on its turn)."""
    return [
        table.c.session_key.in_(sorted({session for session, _ in pairs})),
        table.c.turn_id.in_(sorted({turn for _, turn in pairs})),
        tuple_(table.c.session_key, table.c.turn_id).in_(pairs),
    ]


def _prune_rows(
    conn: Connection,
    rows: Sequence[Any],
    horizons: Mapping[str, int],
    dry_run: bool,
    now: float,
) -> PruneCounts:
    """A handful of statements for the whole batch, however many sessions it spans: a batch
    of 500 turns in 500 sessions is one short transaction, not thousands of statements."""
    pairs = [(row.session_key, row.turn_id) for row in rows]
    last_seqs = select(events.c.session_key, events.c.turn_id, func.max(events.c.seq)).where(
        *_in_pairs(events, pairs)
    )
    undelivered: set[tuple[str, str]] = set()
    for session, turn_id, last in conn.execute(
        last_seqs.group_by(events.c.session_key, events.c.turn_id)
    ):
        horizon = horizons.get(session)
        if horizon is not None and int(last) > horizon:
            undelivered.add((session, turn_id))
    removed_steps = _remove(conn, steps, _in_pairs(steps, pairs), dry_run)
    done = [row for row in rows if (row.session_key, row.turn_id) not in undelivered]
    removed_events = 0
    if done:
        delivered = [(row.session_key, row.turn_id) for row in done]
        removed_events += _remove(conn, events, _in_pairs(events, delivered), dry_run)
    for session, turn_id in sorted(undelivered):  # rare: a renderer behind its thread
        shown = (
            events.c.session_key == session,
            events.c.turn_id == turn_id,
            events.c.seq <= horizons[session],
        )
        removed_events += _remove(conn, events, shown, dry_run)
    generations = archived_rows = 0
    for row in done:
        generation = reset_archived(row.result) if row.kind == TurnKind.RESET.value else None
        if generation is None:
            continue
        generations += 1
        for table in ARCHIVES:
            where = (table.c.session_key == row.session_key, table.c.generation == generation)
            archived_rows += _remove(conn, table, where, dry_run)
    if done and not dry_run:
        ids = [row.id for row in done]
        conn.execute(update(turns).where(turns.c.id.in_(ids)).values(pruned_at=now))
    return PruneCounts(
        turns=len(done),
        steps=removed_steps,
        events=removed_events,
        generations=generations,
        archived_rows=archived_rows,
        held=len(rows) - len(done),
    )


def _remove(
    conn: Connection, table: Table, where: Iterable[ColumnElement[bool]], dry_run: bool
) -> int:
    clauses = list(where)
    if dry_run:
        counted = select(func.count()).select_from(table).where(*clauses)
        return int(conn.execute(counted).scalar_one())
    return int(conn.execute(delete(table).where(*clauses)).rowcount)


# -- receipts -----------------------------------------------------------------------------------


def receipt_candidates(conn: Connection, before: float, after: int, limit: int) -> list[Candidate]:
    query = (
        select(receipts.c.id, receipts.c.session_key)
        .where(
            receipts.c.status.in_(SETTLED_RECEIPTS),
            receipts.c.id > after,
            receipts.c.updated_at < before,
        )
        .order_by(receipts.c.id)
        .limit(limit)
    )
    return [Candidate(id=int(row.id), session=row.session_key) for row in conn.execute(query)]


def prune_receipts(
    conn: Connection, picked: Sequence[Candidate], before: float, dry_run: bool
) -> int:
    live = live_sessions(conn, sorted({c.session for c in picked}), lock=not dry_run)
    where = (
        receipts.c.id.in_([c.id for c in picked if c.session not in live]),
        receipts.c.status.in_(SETTLED_RECEIPTS),
        receipts.c.updated_at < before,
    )
    return _remove(conn, receipts, where, dry_run)
