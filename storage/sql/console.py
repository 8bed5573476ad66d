"""The operator console's reads and its audit writes, on SQLite and PostgreSQL.

Every read takes the session-key prefixes the operator may see (`None`: every session), so a
session of another workspace is filtered out in SQL, never fetched and dropped. Prefixes are
compared with `substr`, not `LIKE`: a team id may hold `_`, which `LIKE` reads as a wildcard.
Bodies are plain `(Connection) -> result` functions run through `SqlStore.run_sync`, as the
store's own are; JSON columns come back as text, decoded by the caller (`bot.console.views`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, false, func, insert, or_, select, true
from sqlalchemy.engine import Connection, RowMapping

from storage.sql.schema import (
    console_audit,
    events,
    messages,
    receipts,
    sessions,
    steps,
    turns,
)

Prefixes = Sequence[str] | None
"""Session-key prefixes an operator may see; None: all."""

MAX_TURNS = 50
"""The latest turns a session's detail shows."""
MAX_EVENTS = 1000
"""The latest events a session's detail shows."""


def _visible(column: Any, prefixes: Prefixes) -> ColumnElement[bool]:
    if prefixes is None:
        return true()
    if not prefixes:
        return false()
    return or_(*(func.substr(column, 1, len(p)) == p for p in prefixes))


def visible(key: str, prefixes: Prefixes) -> bool:
    """The same rule in Python, for one key."""
    return prefixes is None or any(key.startswith(p) for p in prefixes)


@dataclass(frozen=True, kw_only=True)
class SessionRow:
    key: str
    status: str
    updated_at: float
    turns: int
    last_turn_id: str | None
    last_speaker: str | None


def list_sessions(
    conn: Connection,
    prefixes: Prefixes,
    *,
    q: str | None,
    status: str | None,
    limit: int,
    before: tuple[float, str] | None,
) -> list[SessionRow]:
    """The most recently changed sessions first, at most `limit`; `before` is the
    `(updated_at, key)` of the last one of the previous page. `q` matches the key (so its
    channel), a turn id or a speaker (`<team>:<user>`) of one of its turns."""
    query = select(sessions.c.key, sessions.c.status, sessions.c.updated_at).where(
        _visible(sessions.c.key, prefixes)
    )
    if status:
        query = query.where(sessions.c.status == status)
    if q:
        matching_turn = (
            select(turns.c.id)
            .where(
                turns.c.session_key == sessions.c.key,
                or_(
                    turns.c.turn_id.contains(q, autoescape=True),
                    turns.c.speaker.contains(q, autoescape=True),
                ),
            )
            .exists()
        )
        query = query.where(or_(sessions.c.key.contains(q, autoescape=True), matching_turn))
    if before is not None:
        at, key = before
        query = query.where(
            or_(
                sessions.c.updated_at < at,
                (sessions.c.updated_at == at) & (sessions.c.key < key),
            )
        )
    query = query.order_by(sessions.c.updated_at.desc(), sessions.c.key.desc()).limit(limit)
    found = list(conn.execute(query).mappings())
    return [_session_row(conn, row) for row in found]


def get_session(conn: Connection, key: str, prefixes: Prefixes) -> SessionRow | None:
    if not visible(key, prefixes):
        return None
    row = (
        conn.execute(
            select(sessions.c.key, sessions.c.status, sessions.c.updated_at).where(
                sessions.c.key == key
            )
        )
        .mappings()
        .first()
    )
    return None if row is None else _session_row(conn, row)


def _session_row(conn: Connection, row: RowMapping) -> SessionRow:
    key = row["key"]
    count = conn.execute(
        select(func.count()).select_from(turns).where(turns.c.session_key == key)
    ).scalar_one()
    last = (
        conn.execute(
            select(turns.c.turn_id, turns.c.speaker)
            .where(turns.c.session_key == key)
            .order_by(turns.c.id.desc())
            .limit(1)
        )
        .mappings()
        .first()
    )
    return SessionRow(
        key=key,
        status=row["status"],
        updated_at=float(row["updated_at"]),
        turns=int(count),
        last_turn_id=last["turn_id"] if last else None,
        last_speaker=last["speaker"] if last else None,
    )


@dataclass(frozen=True, kw_only=True)
class SessionDetail:
    turns: list[RowMapping]
    steps: list[RowMapping]
    messages: list[RowMapping]
    events: list[RowMapping]
    receipts: list[RowMapping]


def session_detail(conn: Connection, key: str) -> SessionDetail:
    """The latest `MAX_TURNS` turns of a session (oldest first), with their steps, transcript
    messages and events, and the session's receipts."""
    latest = list(
        conn.execute(
            select(turns).where(turns.c.session_key == key).order_by(turns.c.id.desc())
        ).mappings()
    )[:MAX_TURNS]
    latest.reverse()
    ids = [row["turn_id"] for row in latest]
    if not ids:
        return SessionDetail(turns=[], steps=[], messages=[], events=[], receipts=[])
    step_rows = list(
        conn.execute(
            select(steps)
            .where(steps.c.session_key == key, steps.c.turn_id.in_(ids))
            .order_by(steps.c.id)
        ).mappings()
    )
    message_rows = list(
        conn.execute(
            select(messages)
            .where(messages.c.session_key == key, messages.c.turn_id.in_(ids))
            .order_by(messages.c.idx)
        ).mappings()
    )
    event_rows = list(
        conn.execute(
            select(events)
            .where(events.c.session_key == key, events.c.turn_id.in_(ids))
            .order_by(events.c.seq.desc())
            .limit(MAX_EVENTS)
        ).mappings()
    )
    event_rows.reverse()
    receipt_rows = list(
        conn.execute(
            select(receipts).where(receipts.c.session_key == key).order_by(receipts.c.id)
        ).mappings()
    )
    return SessionDetail(
        turns=latest,
        steps=step_rows,
        messages=message_rows,
        events=event_rows,
        receipts=receipt_rows,
    )


def turns_since(conn: Connection, since: float, prefixes: Prefixes) -> list[RowMapping]:
    """`(created_at, status, result)` of every turn queued at or after `since`: the daily
    chart's input, bucketed by the caller (the same Python on both databases)."""
    return list(
        conn.execute(
            select(turns.c.created_at, turns.c.status, turns.c.result).where(
                turns.c.created_at >= since, _visible(turns.c.session_key, prefixes)
            )
        ).mappings()
    )


def event_times(conn: Connection, key: str, after: int) -> dict[int, float | None]:
    """When each event after `after` was logged, by seq (the SSE frames carry it)."""
    rows = conn.execute(
        select(events.c.seq, events.c.created_at).where(
            events.c.session_key == key, events.c.seq > after
        )
    )
    return {int(seq): at for seq, at in rows}


def write_audit(
    conn: Connection, *, at: float, who: str, action: str, target: str | None, detail: Any
) -> None:
    conn.execute(
        insert(console_audit).values(
            at=at,
            who=who,
            action=action,
            target=target,
            detail=None if detail is None else json.dumps(detail, sort_keys=True),
        )
    )


def read_audit(
    conn: Connection, limit: int, prefixes: Prefixes, who: str | None = None
) -> list[RowMapping]:
    """The latest entries, newest first: for an operator of some workspaces, those whose
    target is a session they may see, and their own (`who`)."""
    query = select(console_audit)
    if prefixes is not None:
        mine = console_audit.c.who == who if who is not None else false()
        query = query.where(or_(_visible(console_audit.c.target, prefixes), mine))
    return list(
        conn.execute(
            query.order_by(console_audit.c.at.desc(), console_audit.c.id.desc()).limit(limit)
        ).mappings()
    )
