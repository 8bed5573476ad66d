"""Transaction bodies for quorum votes (`Votes`): cast one, list a request's.

A vote starts, as an answer does (`storage.sql.parks.resume`), by locking the session row, so
two votes on one request serialise: the later reads the earlier, and exactly one of them sees
the quorum reached. The checks that the request still waits come after the lock, each a fresh
snapshot on PostgreSQL, so a vote never lands on a request an answer or a Stop just ended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from agent.seams import (
    ConfirmationStatus,
    JsonValue,
    ResumeConflictError,
    SessionStatus,
    TimerKind,
    TurnEvent,
    VoteRecord,
)
from storage.json_text import canonical_json
from storage.sql.parks import log_events
from storage.sql.schema import approval_votes, confirmations, sessions
from storage.sql.turns import reset_pending


def cast(
    conn: Connection,
    vote: VoteRecord,
    expected_pending: JsonValue,
    new_events: Sequence[TurnEvent],
    now: float,
) -> tuple[list[VoteRecord], int | None]:
    """The body of `SqlStore.cast_vote`: every vote on the request after this one, and the last
    event seq when the vote was inserted (None when its voter had voted already)."""
    state = conn.execute(
        select(sessions.c.status, sessions.c.pending)
        .where(sessions.c.key == vote.session)
        .with_for_update()
    ).first()
    if state is None:
        raise ResumeConflictError("no such session")
    _check_waiting(conn, vote, state.status, state.pending, expected_pending)
    if _voted(conn, vote):
        return list_votes(conn, vote.session, vote.kind, vote.turn_id, vote.request_id), None
    try:
        conn.execute(insert(approval_votes).values(_row(vote)))
    except IntegrityError as err:  # the lock makes this unreachable; the constraint backs it
        raise ResumeConflictError(f"{vote.voter!r} has voted on this request already") from err
    last_seq = log_events(conn, vote.session, new_events, updated_at=now)
    return list_votes(conn, vote.session, vote.kind, vote.turn_id, vote.request_id), last_seq


def _check_waiting(
    conn: Connection, vote: VoteRecord, status: str, pending: str | None, expected: JsonValue
) -> None:
    if vote.kind == TimerKind.INPUT:
        if status != SessionStatus.SUSPENDED or pending != canonical_json(expected):
            raise ResumeConflictError(
                "the session is not parked on that request (answered already, changed, or reset)"
            )
        if reset_pending(conn, vote.session):
            raise ResumeConflictError("a reset of the session is queued; the park will end")
        return
    proposal = conn.execute(
        select(confirmations.c.status).where(
            confirmations.c.session_key == vote.session,
            confirmations.c.confirmation_id == vote.request_id,
        )
    ).scalar_one_or_none()
    if proposal != ConfirmationStatus.PENDING.value:
        raise ResumeConflictError(f"confirmation {vote.request_id!r} is not pending")


def _voted(conn: Connection, vote: VoteRecord) -> bool:
    found = conn.execute(
        select(approval_votes.c.id).where(
            *_of_request(vote.session, vote.kind, vote.turn_id, vote.request_id),
            approval_votes.c.voter == vote.voter,
        )
    ).first()
    return found is not None


def list_votes(
    conn: Connection, session: str, kind: TimerKind, turn_id: str, request_id: str
) -> list[VoteRecord]:
    rows = conn.execute(
        select(approval_votes)
        .where(*_of_request(session, kind, turn_id, request_id))
        .order_by(approval_votes.c.id)
    ).all()
    return [_record(row._mapping) for row in rows]


def _of_request(session: str, kind: TimerKind, turn_id: str, request_id: str) -> list[Any]:
    return [
        approval_votes.c.session_key == session,
        approval_votes.c.kind == kind.value,
        approval_votes.c.turn_id == turn_id,
        approval_votes.c.request_id == request_id,
    ]


def _row(vote: VoteRecord) -> dict[str, Any]:
    return {
        "session_key": vote.session,
        "kind": vote.kind.value,
        "turn_id": vote.turn_id,
        "request_id": vote.request_id,
        "voter": vote.voter,
        "approve": vote.approve,
        "reason": vote.reason,
        "voted_at": vote.at,
    }


def _record(row: Any) -> VoteRecord:
    return VoteRecord(
        session=row["session_key"],
        kind=TimerKind(row["kind"]),
        turn_id=row["turn_id"],
        request_id=row["request_id"],
        voter=row["voter"],
        approve=bool(row["approve"]),
        at=float(row["voted_at"]),
        reason=row["reason"],
    )
