"""The store's role for quorum approvals: each person's vote on a request, kept durably before
the request resolves, so "1 of 2: approved by @alice" survives a restart and one person counts
once, whichever process or surface their clicks reach.

A vote is cast under the session row's lock (as an answer is, `Approvals.resume_turn`), after
checking that the request still waits: two people voting at once are serialised, so the later
one reads both votes and exactly one of them sees the quorum reached. Resolving the request is
then the answer path's own conditional write, which only one caller wins.

Its contract: tests/contract/test_votes_store.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from agent._events import TurnEvent
from agent._messages import JsonValue
from agent._records import TimerKind


@dataclass(frozen=True, kw_only=True)
class VoteRecord:
    """One person's answer to a request that needs several: who, which way, when, and why."""

    session: str
    kind: TimerKind
    """INPUT: a parked `ctx.request_input` (`request_id` is the input id); CONFIRMATION: a
    proposed write (`request_id` is the confirmation id). `turn_id` is the asking turn."""
    turn_id: str
    request_id: str
    voter: str
    approve: bool
    at: float
    reason: str | None = None
    """What the voter said with it (scrubbed, at most `MAX_REASON_CHARS`)."""


class Votes(Protocol):
    """Votes on requests that need several people (`Quorum` answerers)."""

    async def cast_vote(
        self,
        vote: VoteRecord,
        *,
        expected_pending: JsonValue = None,
        events: Sequence[TurnEvent] = (),
    ) -> tuple[list[VoteRecord], list[TurnEvent]]:
        """Record `vote` if its request still waits and its voter has not voted on it yet.

        In one transaction, under the session row's lock: for an INPUT vote, the session is
        `suspended` with `pending` equal to `expected_pending` and no reset is queued; for a
        CONFIRMATION vote, the confirmation `request_id` of the session is `pending`. Otherwise
        `ResumeConflictError` and nothing is written. Then, if `vote.voter` has no vote on this
        request (session, kind, turn, request), the vote is inserted and `events` logged,
        numbered as `resume_turn` numbers them; if they have one, nothing is written (their
        first vote stands) and no event is logged. Returns every vote on the request in the
        order cast (the voter's own included) and the events logged (empty when none was)."""
        ...

    async def list_votes(
        self, session: str, kind: TimerKind, turn_id: str, request_id: str
    ) -> list[VoteRecord]:
        """Every vote on one request, in the order cast (`[]` for none or an unknown one)."""
        ...
