"""The `Votes` contract: a vote is cast only on a request that still waits, one person counts
once, votes read back in the order cast with their events numbered, and two votes cast at once
are serialised (the later reads the earlier). Every refusal changes nothing. Run against
`memory`, `sqlite` and `postgres`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import ApprovalVoted, ResumeConflictError, SessionStore
from agent.seams import ConfirmationStatus, TimerKind, VoteRecord
from tests.contract.conftest import Reopen
from tests.contract.test_approval_store import (
    OTHER,
    S,
    _parked,
    _proposed,
    _resolve,
    _resolved,
    _seqs,
)


def _vote(voter: str, approve: bool = True, **kw: Any) -> VoteRecord:
    fields: dict[str, Any] = {
        "session": S,
        "kind": TimerKind.INPUT,
        "turn_id": "t1",
        "request_id": "approve",
        "voter": voter,
        "approve": approve,
        "at": 1_500.0,
        **kw,
    }
    return VoteRecord(**fields)


def _event(vote: VoteRecord) -> ApprovalVoted:
    kind = "input" if vote.kind == TimerKind.INPUT else "confirmation"
    return ApprovalVoted(
        session=vote.session,
        turn_id=vote.turn_id,
        kind=kind,
        request_id=vote.request_id,
        by=vote.voter,
        approve=vote.approve,
        reason=vote.reason,
    )


async def _listed(store: SessionStore, vote: VoteRecord) -> list[VoteRecord]:
    return await store.list_votes(vote.session, vote.kind, vote.turn_id, vote.request_id)


async def test_votes_are_kept_in_order_and_one_person_counts_once(store: SessionStore) -> None:
    pending = await _parked(store)
    before = await _seqs(store)
    first = _vote("UA", reason="fine by me")
    votes, events = await store.cast_vote(first, expected_pending=pending, events=[_event(first)])
    assert votes == [first]
    assert [(e.type, e.seq) for e in events] == [("approval.voted", before[-1][0] + 1)]
    assert (await _seqs(store))[-1] == (before[-1][0] + 1, "approval.voted")

    second = _vote("UB", approve=False)
    votes, events = await store.cast_vote(second, expected_pending=pending, events=[_event(second)])
    assert votes == [first, second]
    assert len(events) == 1

    # UA again, the other way: their first vote stands, nothing is written or logged.
    again = _vote("UA", approve=False, at=1_600.0)
    logged = await _seqs(store)
    votes, events = await store.cast_vote(again, expected_pending=pending, events=[_event(again)])
    assert (votes, events) == ([first, second], [])
    assert await _seqs(store) == logged
    assert await _listed(store, first) == [first, second]


async def test_a_vote_on_a_request_that_no_longer_waits_is_refused(store: SessionStore) -> None:
    pending = await _parked(store)
    vote = _vote("UA")
    with pytest.raises(ResumeConflictError):
        await store.cast_vote(vote, expected_pending={**pending, "parked_at": 0})
    await store.resume_turn(
        S,
        "t1",
        expected_pending=pending,
        answer_step="input:t1:approve",
        answer=True,
        events=[_resolved("answered")],
    )
    logged = await _seqs(store)
    with pytest.raises(ResumeConflictError):
        await store.cast_vote(vote, expected_pending=pending, events=[_event(vote)])
    assert await _listed(store, vote) == []
    assert await _seqs(store) == logged
    with pytest.raises(ResumeConflictError):  # a session that never was
        await store.cast_vote(_vote("UA", session="nowhere"), expected_pending=pending)


async def test_a_queued_reset_refuses_a_vote_on_the_park(store: SessionStore) -> None:
    pending = await _parked(store)
    await store.enqueue_reset(S, "reset:1")
    with pytest.raises(ResumeConflictError, match="reset"):
        await store.cast_vote(_vote("UA"), expected_pending=pending)
    assert await _listed(store, _vote("UA")) == []


async def test_votes_on_a_proposed_write_while_it_is_pending(store: SessionStore) -> None:
    proposal = await _proposed(store, S, "t1")
    vote = _vote(
        "UA", kind=TimerKind.CONFIRMATION, request_id=proposal.confirmation_id, turn_id="t1"
    )
    votes, events = await store.cast_vote(vote, events=[_event(vote)])
    assert votes == [vote]
    assert len(events) == 1
    unknown = _vote("UA", kind=TimerKind.CONFIRMATION, request_id="t9:c1")
    with pytest.raises(ResumeConflictError):
        await store.cast_vote(unknown)
    await _resolve(store, proposal, ConfirmationStatus.DENIED, by="UB")
    late = _vote("UC", kind=TimerKind.CONFIRMATION, request_id=proposal.confirmation_id)
    with pytest.raises(ResumeConflictError):
        await store.cast_vote(late)
    assert await _listed(store, vote) == [vote]


async def test_votes_of_one_request_are_its_own(store: SessionStore) -> None:
    pending = await _parked(store)
    other_pending = await _parked(store, session=OTHER)
    mine = _vote("UA")
    theirs = _vote("UA", session=OTHER)
    await store.cast_vote(mine, expected_pending=pending)
    await store.cast_vote(theirs, expected_pending=other_pending)
    assert await _listed(store, mine) == [mine]
    assert await _listed(store, theirs) == [theirs]
    assert await store.list_votes(S, TimerKind.CONFIRMATION, "t1", "approve") == []
    assert await store.list_votes(S, TimerKind.INPUT, "t2", "approve") == []
    assert await store.list_votes("nowhere", TimerKind.INPUT, "t1", "approve") == []


async def test_two_votes_cast_at_once_are_serialised(store: SessionStore, reopen: Reopen) -> None:
    """Two processes' votes on one request: both are kept, and the later one's reading holds
    both, so exactly one of them can see a quorum of two reached."""
    pending = await _parked(store)
    other = await reopen()
    for round_ in range(5):
        a, b = _vote(f"UA{round_}"), _vote(f"UB{round_}")
        (votes_a, _), (votes_b, _) = await asyncio.gather(
            store.cast_vote(a, expected_pending=pending, events=[_event(a)]),
            other.cast_vote(b, expected_pending=pending, events=[_event(b)]),
        )
        new = {a.voter, b.voter}
        seen = sorted(len({v.voter for v in votes} & new) for votes in (votes_a, votes_b))
        assert seen == [1, 2], (votes_a, votes_b)
    assert len(await _listed(store, _vote("x"))) == 10
    seqs = [seq for seq, kind in await _seqs(store) if kind == "approval.voted"]
    assert seqs == sorted(set(seqs))
    assert len(seqs) == 10
