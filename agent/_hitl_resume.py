"""Answering a parked request (`AgentSession.resume`): the checks, then one conditional write.

A request with one answerer takes one answer. A request that needs several (`Quorum`) takes
votes: each is stored as it is cast (`Votes.cast_vote`, serialised with every other write to
the session), and the vote that decides the tally answers the request through the same write a
single answer makes, so of two racing deciding votes exactly one resolves it and the other
reads the outcome. A vote whose caster died before resolving is resolved by the next vote, or
by the same voter clicking again (their vote is not counted twice, the tally is read again).
"""

from __future__ import annotations

from collections.abc import Callable

from agent._errors import ResumeConflictError
from agent._events import InputResolved, TurnEvent
from agent._hitl_answer_notes import answered_note, clean_reason, note_step_id
from agent._hitl_answerers import QuorumAnswerer
from agent._hitl_answering import (
    ALREADY_ANSWERED,
    EXPIRED,
    STOPPED,
    gone_reason,
    parked_workspace,
    waiting_request,
)
from agent._hitl_checks import (
    Grant,
    Principal,
    answer_step_id,
    answering_user,
    check_workspace,
    validate_answer,
)
from agent._hitl_quorum import Ballot, Tally, VoteTarget, quorum_note, tally, vote_of
from agent._hitl_reminding import authorize_widened, escalated_answerers
from agent._hitl_requests import InputRequest, without_request
from agent._messages import JsonData, JsonValue
from agent._session_host import SessionHandle
from agent.seams import SessionRecord, StoreHandle, TimerKind

SIBLING_RACES = 3
"""How often `resume` checks again after losing the store's race to an answer to another request
of the same park (a refusal that says nothing about this request): more than a park has
requests answered at the same instant, in practice."""


class _Sibling(Exception):
    """The store refused because a sibling request of the park was answered first: check again
    (`counted`: this call's vote was stored before, so a retry reading it is not a repeat)."""

    def __init__(self, counted: bool = False) -> None:
        super().__init__()
        self.counted = counted


async def answer_input(
    session: SessionHandle,
    turn_id: str,
    input_id: str,
    value: JsonData,
    *,
    by: str | None,
    principal: Principal | None,
    granted: Grant | None,
    digest: str | None,
    reason: str | None,
    alongside: Callable[[StoreHandle], None] | None,
) -> Tally | None:
    """The body of `AgentSession.resume` (see there); the tally for a quorum request."""
    runtime = session.runtime
    counted = False
    for attempt in range(SIBLING_RACES + 1):
        record, request = await waiting_request(
            runtime.store, session.key, turn_id, input_id, digest=digest, now=runtime.clock()
        )
        check_workspace(parked_workspace(record.pending), principal)
        voter = answering_user(by, principal)
        escalated = await escalated_answerers(
            runtime.store, session.key, TimerKind.INPUT, turn_id, input_id
        )
        authorize_widened(
            request.answerers, escalated, by=voter, granted=granted, digest=request.digest
        )
        validate_answer(value, request.json_schema)
        said = clean_reason(reason, runtime.redact)
        try:
            if isinstance(request.answerers, QuorumAnswerer):
                assert voter is not None  # `authorize` refuses a vote without its voter
                return await _vote(
                    session,
                    record,
                    request,
                    request.answerers,
                    Ballot(approve=vote_of(value), voter=voter, reason=said, counted=counted),
                    alongside,
                )
            await _answer(session, record, request, value, voter, said, alongside, None)
            return None
        except _Sibling as sibling:
            counted = counted or sibling.counted
            if attempt == SIBLING_RACES:
                raise ResumeConflictError(
                    "the conversation's requests kept changing; answer again"
                ) from None
    raise AssertionError("unreachable")  # pragma: no cover


async def _vote(
    session: SessionHandle,
    record: SessionRecord,
    request: InputRequest,
    quorum: QuorumAnswerer,
    ballot: Ballot,
    alongside: Callable[[StoreHandle], None] | None,
) -> Tally:
    """Cast the vote; if the tally now decides the request, answer it with the outcome."""
    runtime = session.runtime
    where = VoteTarget(kind=TimerKind.INPUT, turn_id=request.turn_id, request_id=request.id)
    try:
        votes, events = await runtime.store.cast_vote(
            ballot.record(session.key, where, runtime.clock()),
            expected_pending=record.pending,
            events=[ballot.event(session.key, where)],
        )
    except ResumeConflictError:
        await _refused(session, request)
        raise  # pragma: no cover - `_refused` always raises
    for event in events:
        await runtime.hub.emit(event)
    counted = tally(quorum, votes, counted=ballot.counted or bool(events))
    if counted.outcome is None:
        return counted
    decided = counted.outcome == "approved"
    try:
        await _answer(
            session, record, request, decided, ballot.voter, ballot.reason, alongside, counted
        )
    except ResumeConflictError as lost:
        # Another deciding vote resolved it first: the outcome stands, told to this voter too.
        if str(lost) != ALREADY_ANSWERED:
            raise
    except _Sibling:
        raise _Sibling(counted=counted.counted) from None
    return counted


async def _answer(
    session: SessionHandle,
    record: SessionRecord,
    request: InputRequest,
    value: JsonValue,
    by: str | None,
    said: str | None,
    alongside: Callable[[StoreHandle], None] | None,
    decided: Tally | None,
) -> None:
    """The one conditional write that answers the request (the park goes on while siblings
    still wait); `_Sibling` when a sibling's answer won the race, so the caller checks again."""
    runtime = session.runtime
    note_id = note_step_id(request.turn_id, request.id)
    notes: dict[str, JsonValue] | None = None
    if decided is not None:
        notes = {note_id: quorum_note(decided, by, said)}
    elif said:
        notes = {note_id: answered_note(by, said)}
    resolved = InputResolved(
        session=session.key,
        turn_id=request.turn_id,
        input_id=request.id,
        outcome="answered",
        by=by,
        reason=said,
        approved_by=list(decided.approved_by) if decided is not None else None,
    )
    try:
        events: list[TurnEvent] = await runtime.store.resume_turn(
            session.key,
            request.turn_id,
            expected_pending=record.pending,
            answer_step=answer_step_id(request.turn_id, request.id),
            answer=value,
            notes=notes,
            events=[resolved],
            alongside=alongside,
            still_pending=without_request(record.pending, request),
            request_id=request.id,
        )
    except ResumeConflictError:
        await _refused(session, request)
    for event in events:
        await runtime.hub.emit(event)
    runtime.kick(session.key)


async def _refused(session: SessionHandle, request: InputRequest) -> None:
    """The store refused: another answer won under its lock, to this request (say so), or to a
    sibling waiting in the same park (this one still waits: `_Sibling`, check again)."""
    why = await gone_reason(session.runtime.store, session.key, request.turn_id, request.id)
    if why in (ALREADY_ANSWERED, EXPIRED, STOPPED):
        raise ResumeConflictError(why) from None
    raise _Sibling
