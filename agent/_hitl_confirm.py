"""Answering a proposed write (`AgentSession.confirm`): which proposal an answer is for, who
may give it, and what the answer queues.

An answer is bound to its proposal as a park's is to its request: the host may name the turn
that proposed it (`turn_id=`) and the digest of the proposal as it was shown (`digest=`,
`confirmation_digest`), and an answer whose turn or digest is not the proposal's is refused
(`ResumeConflictError`) with nothing written, so a button whose value names another turn, or
carries a digest of something else, answers nothing. Given neither, the proposal id alone names
it, as it always did (host code; buttons posted before buttons carried the digest): a
proposal's row never changes once recorded, so its id names one fixed call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from agent._errors import ResumeConflictError, ResumeValidationError, ToolError
from agent._events import ConfirmationResolved
from agent._hitl_answer_notes import clean_reason, confirmation_follow_up
from agent._hitl_answerers import QuorumAnswerer
from agent._hitl_answering import ALREADY_ANSWERED, ANOTHER_WAITS, CHANGED, EXPIRED, refuse_expired
from agent._hitl_checks import (
    AuthorizeAnswer,
    Grant,
    Principal,
    answering_user,
    check_workspace,
    request_digest,
    workspace_of,
)
from agent._hitl_edits import NOT_EDITABLE, QUORUM_EDIT, Edit, EditRejected, apply_edits
from agent._hitl_grants import AllowAgain, check_allow_again, issue_standing_grant
from agent._hitl_quorum import Ballot, Tally, VoteTarget, tally
from agent._hitl_reminding import authorize_widened, escalated_answerers, grant_widened
from agent._hitl_requests import ConfirmationRequest
from agent._messages import JsonData
from agent._session_host import SessionHandle
from agent._turn_input import TurnInput
from agent.seams import (
    ConfirmationRecord,
    ConfirmationStatus,
    Ledgers,
    StoreHandle,
    TimerKind,
    TurnQueue,
)

NO_SUCH = "no such request is waiting in this conversation"


def confirmation_digest(proposal: ConfirmationRecord | ConfirmationRequest) -> str:
    """Binds an answer (and a grant) to the exact proposal: its call, prompt and answerers, and
    for a `confirmation="capability"` tool the details the person is shown (so an approval of
    $42 is never an approval of $4,200). A proposal without details keeps the digest it always
    had. The same from the stored record as from the `confirmation.requested` event that
    announced it, so a surface that shows the event can put the digest on its buttons."""
    approved: Any = proposal.arguments
    if proposal.details is not None:
        approved = {"arguments": proposal.arguments, "details": proposal.details}
    ident = proposal.confirmation_id if isinstance(proposal, ConfirmationRecord) else proposal.id
    return request_digest(proposal.turn_id, ident, proposal.prompt, approved, proposal.answerers)


async def pending_proposal(
    store: Ledgers,
    key: str,
    confirmation_id: str,
    *,
    turn_id: str | None,
    digest: str | None,
    now: float,
) -> ConfirmationRecord:
    """The proposal named, if it still waits for an answer and is the one the answer names;
    `ResumeConflictError` saying why not otherwise."""
    record = await store.get_confirmation(key, confirmation_id)
    if record is None:
        raise ResumeConflictError(NO_SUCH)
    if turn_id is not None and turn_id != record.turn_id:
        raise ResumeConflictError(ANOTHER_WAITS)
    if record.status != ConfirmationStatus.PENDING:
        raise ResumeConflictError(_settled(record))
    if digest is not None and digest != confirmation_digest(record):
        raise ResumeConflictError(CHANGED)
    refuse_expired(record.expires_at, now)
    return record


def _settled(record: ConfirmationRecord) -> str:
    return EXPIRED if record.status == ConfirmationStatus.EXPIRED else ALREADY_ANSWERED


async def proposal_workspace(store: TurnQueue, record: ConfirmationRecord) -> dict[str, str]:
    """The workspace of the turn that proposed the write (a reset expires what it archives)."""
    proposing = await store.get_turn(record.session, record.turn_id)
    return workspace_of(proposing.input if proposing is not None else None)


async def grant_confirmation(
    session: SessionHandle,
    confirmation_id: str,
    *,
    by: str | None,
    principal: Principal | None = None,
    authorize_answer: AuthorizeAnswer | None = None,
    turn_id: str | None = None,
    digest: str | None = None,
) -> Grant | None:
    """`grant_answer` for a proposed write (`by`, `principal`, `turn_id` and `digest` checked
    as `confirm` checks them, so the hook is never asked about an answer that would be
    refused)."""
    store = session.runtime.store
    record = await pending_proposal(
        store,
        session.key,
        confirmation_id,
        turn_id=turn_id,
        digest=digest,
        now=session.runtime.clock(),
    )
    check_workspace(await proposal_workspace(store, record), principal)
    by = answering_user(by, principal)
    escalated = await escalated_answerers(
        store, session.key, TimerKind.CONFIRMATION, record.turn_id, confirmation_id
    )
    return await grant_widened(
        record.answerers,
        escalated,
        by=by,
        principal=principal,
        digest=confirmation_digest(record),
        authorize_answer=authorize_answer or session.agent.authorize_answer,
    )


async def answer_confirmation(
    session: SessionHandle,
    confirmation_id: str,
    accepted: bool,
    *,
    by: str | None,
    principal: Principal | None,
    granted: Grant | None,
    reason: str | None,
    alongside: Callable[[StoreHandle], None] | None,
    turn_id: str | None,
    digest: str | None,
    allow_again: AllowAgain | None = None,
    edits: Mapping[str, JsonData] | None = None,
) -> str:
    """The body of `AgentSession.confirm` (see there); returns the follow-up turn's id."""
    runtime = session.runtime
    store = runtime.store
    record = await pending_proposal(
        store, session.key, confirmation_id, turn_id=turn_id, digest=digest, now=runtime.clock()
    )
    workspace = await proposal_workspace(store, record)
    check_workspace(workspace, principal)
    by = answering_user(by, principal)
    escalated = await escalated_answerers(
        store, session.key, TimerKind.CONFIRMATION, record.turn_id, confirmation_id
    )
    authorize_widened(
        record.answerers, escalated, by=by, granted=granted, digest=confirmation_digest(record)
    )
    said = clean_reason(reason, runtime.redact)
    edit = _edit(session, record, accepted, edits)
    standing: tuple[TurnInput | None, str, str | None] | None = None
    if allow_again is not None:
        proposing = await store.get_turn(record.session, record.turn_id)
        turn_input = proposing.input if proposing is not None else None
        speaker, channel = check_allow_again(
            allow_again,
            accepted=accepted,
            record=record,
            tool=session.agent.tool_named(record.tool),
            proposing=turn_input,
        )
        standing = (turn_input, speaker, channel)
    follow_up = f"confirm:{confirmation_id}"
    decided: Tally | None = None
    if isinstance(record.answerers, QuorumAnswerer):
        assert by is not None  # `authorize` refuses a vote without its voter
        decided = await _vote(
            session, record, record.answerers, Ballot(approve=accepted, voter=by, reason=said)
        )
        if decided.outcome is None:
            return follow_up  # queued once the votes decide
        accepted = decided.outcome == "approved"
    status = ConfirmationStatus.ACCEPTED if accepted else ConfirmationStatus.DENIED
    approved_by = list(decided.approved_by) if decided is not None else None
    turn_input = confirmation_follow_up(
        record,
        status=status,
        by=by,
        reason=said,
        workspace=workspace,
        approved_by=approved_by,
        edit=edit,
    )
    resolved = ConfirmationResolved(
        session=session.key,
        turn_id=follow_up,
        confirmation_id=confirmation_id,
        accepted=accepted,
        by=by,
        outcome="accepted" if accepted else "denied",
        reason=said,
        approved_by=approved_by,
        arguments=edit.arguments if edit is not None else None,
        changes=edit.changes_json() if edit is not None else None,
    )
    try:
        _, events = await store.resolve_confirmation(
            session.key,
            confirmation_id,
            accepted=accepted,
            by=by,
            follow_up_turn=follow_up,
            follow_up=turn_input,
            events=[resolved],
            now=runtime.clock(),
            reason=said,
            alongside=alongside,
            approved_arguments=edit.arguments if edit is not None else None,
        )
    except ResumeConflictError:
        # Another answer (or the expiry) won the race under the store's lock: say which.
        now = await store.get_confirmation(session.key, confirmation_id)
        if now is None or now.status == ConfirmationStatus.PENDING:
            raise
        if decided is not None and now.status == status:
            return follow_up  # a racing deciding vote resolved it: the outcome stands
        raise ResumeConflictError(_settled(now)) from None
    if allow_again is not None and standing is not None and by is not None:
        await issue_standing_grant(
            store,
            allow_again,
            record=record,
            proposing=standing[0],
            speaker=standing[1],
            channel=standing[2],
            by=by,
            now=runtime.clock(),
        )
    for event in events:
        await runtime.hub.emit(event)
    runtime.kick(session.key)
    return follow_up


def _edit(
    session: SessionHandle,
    record: ConfirmationRecord,
    accepted: bool,
    edits: Mapping[str, JsonData] | None,
) -> Edit | None:
    """The call an approval with edits runs (None: as proposed); refused, with nothing
    applied, where edits cannot be made."""
    if edits is None:
        return None
    if not accepted:
        raise ResumeValidationError("edits come with an approval; a denial runs nothing")
    if isinstance(record.answerers, QuorumAnswerer):
        raise ResumeValidationError(QUORUM_EDIT)
    if record.details is not None:
        raise ResumeValidationError(NOT_EDITABLE)
    tool = session.agent.tool_named(record.tool)
    edit = apply_edits(tool, record.arguments, edits)
    if edit is not None and tool is not None and tool.answerers_for is not None:
        # Who confirms was chosen from the proposed arguments: an edit that would have needed
        # other approvers (a refund raised past the two-approver line) is not this one's call.
        try:
            same = tool.answerers_of_call(edit.arguments) == tool.answerers_of_call(
                record.arguments
            )
        except ToolError:
            same = False
        if not same:
            raise EditRejected(
                "with these changes the call needs other approvers; deny it and ask for a "
                "new request instead",
                {name: "This value needs other approvers." for name in edit.changes},
            )
    return edit


async def _vote(
    session: SessionHandle, record: ConfirmationRecord, quorum: QuorumAnswerer, ballot: Ballot
) -> Tally:
    """Cast a vote on a proposal that needs several approvals; the tally after it."""
    runtime = session.runtime
    where = VoteTarget(
        kind=TimerKind.CONFIRMATION, turn_id=record.turn_id, request_id=record.confirmation_id
    )
    try:
        votes, events = await runtime.store.cast_vote(
            ballot.record(session.key, where, runtime.clock()),
            events=[ballot.event(session.key, where)],
        )
    except ResumeConflictError:
        now = await runtime.store.get_confirmation(session.key, record.confirmation_id)
        if now is None or now.status == ConfirmationStatus.PENDING:
            raise
        raise ResumeConflictError(_settled(now)) from None
    for event in events:
        await runtime.hub.emit(event)
    return tally(quorum, votes, counted=bool(events))
