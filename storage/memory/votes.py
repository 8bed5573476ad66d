"""`MemoryStore`'s quorum votes: the same checks and writes as `storage.sql.votes`, on the
in-memory state (the store's lock serialises them, as the session row's lock does in SQL)."""

from __future__ import annotations

from collections.abc import Sequence

from agent.seams import (
    ConfirmationStatus,
    JsonValue,
    ResumeConflictError,
    SessionStatus,
    TimerKind,
    VoteRecord,
)
from storage.json_text import canonical_json
from storage.memory.state import SessionState, reset_pending
from storage.records import EventRow


def cast(
    state: SessionState | None,
    vote: VoteRecord,
    expected_pending: JsonValue,
    rows: Sequence[EventRow],
    now: float,
) -> tuple[list[VoteRecord], int | None]:
    """As `storage.sql.votes.cast`: the request's votes, and the last event seq when the vote
    was inserted (None when its voter had voted already)."""
    if state is None:
        raise ResumeConflictError("no such session")
    if vote.kind == TimerKind.INPUT:
        if state.status != SessionStatus.SUSPENDED or state.pending != canonical_json(
            expected_pending
        ):
            raise ResumeConflictError(
                "the session is not parked on that request (answered already, changed, or reset)"
            )
        if reset_pending(state):
            raise ResumeConflictError("a reset of the session is queued; the park will end")
    else:
        proposal = state.confirmations.get(vote.request_id)
        if proposal is None or proposal["status"] != ConfirmationStatus.PENDING.value:
            raise ResumeConflictError(f"confirmation {vote.request_id!r} is not pending")
    if any(cast.voter == vote.voter for cast in of_request(state, vote)):
        return of_request(state, vote), None
    state.votes.append(vote)
    state.updated_at = now
    last_seq = state.append_events(rows)
    return of_request(state, vote), last_seq


def of_request(state: SessionState, vote: VoteRecord) -> list[VoteRecord]:
    return listed(state, vote.kind, vote.turn_id, vote.request_id)


def listed(state: SessionState, kind: TimerKind, turn_id: str, request_id: str) -> list[VoteRecord]:
    return [
        v for v in state.votes if (v.kind, v.turn_id, v.request_id) == (kind, turn_id, request_id)
    ]
