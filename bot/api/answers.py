"""The answer endpoints: what waits on a session, answering a parked request, confirming a
proposed write. Each reaches the same engine call a Slack click does (grant, then `resume` /
`confirm` with the caller's principal), so the API can neither answer more nor less than Slack.

A request that needs several approvals (`Quorum`) takes the caller's answer as a vote: the
reply's `votes` says where it stands (`outcome` null: still waiting for others), and the turn
resumes (or the write's turn is queued) only once the votes decide.

A confirmation may carry `allow_again` ("Approve, and allow this again"): the engine issues a
standing grant with the approval, or refuses both (422, nothing applied); the reply names the
grant (`bot.api.grants`). It may carry `edits` for a tool declared `editable`: the call runs
with them (`approved_arguments` in the reply), or a 422 names each field that does not fit.
"""

from __future__ import annotations

from typing import Any, Literal

from agent import (
    Answerer,
    ConfirmationRecord,
    ConfirmationStatus,
    QuorumAnswerer,
    ResumeRequest,
    Runtime,
    Tally,
    confirmation_digest,
    grant_answer,
    grant_confirmation,
)
from bot.api import grants
from bot.api.addressed import Addressed, hooked
from bot.api.schemas import (
    AnsweredOut,
    ConfirmationsOut,
    ConfirmBody,
    ConfirmOut,
    PendingConfirmationOut,
    PendingInputOut,
    PendingOut,
    ResumeBody,
    ResumeOut,
    VotesOut,
)


async def resume(where: Addressed, body: ResumeBody) -> ResumeOut:
    caller = where.caller
    request = ResumeRequest(
        turn_id=body.turn_id, input_id=body.input_id, by=caller.user, principal=caller.principal
    )
    granted = await hooked(grant_answer(where.session, request))
    voted = await where.session.resume(
        body.turn_id,
        body.input_id,
        body.value,
        by=caller.user,
        principal=caller.principal,
        granted=granted,
        digest=body.digest,
        reason=body.reason,
    )
    return ResumeOut(
        session=where.key,
        turn_id=body.turn_id,
        input_id=body.input_id,
        poll=where.poll(body.turn_id),
        votes=votes_out(voted),
    )


async def confirm(where: Addressed, confirmation_id: str, body: ConfirmBody) -> ConfirmOut:
    caller = where.caller
    granted = await hooked(
        grant_confirmation(
            where.session,
            confirmation_id,
            by=caller.user,
            principal=caller.principal,
            digest=body.digest,
        )
    )
    follow_up = await where.session.confirm(
        confirmation_id,
        body.accepted,
        by=caller.user,
        principal=caller.principal,
        granted=granted,
        reason=body.reason,
        digest=body.digest,
        allow_again=grants.allow_again(body.allow_again),
        edits=body.edits,
    )
    proposal = await where.session.runtime.store.get_confirmation(where.stored, confirmation_id)
    voted = (
        await where.session.tally("confirm", proposal.turn_id, confirmation_id)
        if proposal is not None
        else None
    )
    return ConfirmOut(
        session=where.key,
        confirmation_id=confirmation_id,
        accepted=body.accepted,
        turn_id=follow_up,
        poll=where.poll(follow_up),
        votes=votes_out(voted),
        grant=await grants.issued(where, confirmation_id) if body.allow_again else None,
        approved_arguments=proposal.approved_arguments if proposal is not None else None,
    )


async def history(where: Addressed, limit: int) -> ConfirmationsOut:
    """The session's proposed writes, newest first, each with its answer and both calls (as
    proposed, and as it ran where the approver edited it)."""
    proposals = list(reversed(await where.session.confirmations()))[:limit]
    return ConfirmationsOut(
        session=where.key,
        confirmations=[
            AnsweredOut(
                confirmation_id=p.confirmation_id,
                turn_id=p.turn_id,
                tool=p.tool,
                prompt=p.prompt,
                status=p.status.value,
                by=p.by,
                reason=p.reason,
                arguments=p.arguments,
                approved_arguments=p.approved_arguments,
                created_at=p.created_at,
                resolved_at=p.resolved_at,
                follow_up_turn=p.follow_up_turn,
                votes=await _votes(where, "confirm", p.turn_id, p.confirmation_id),
            )
            for p in proposals
        ],
    )


async def pending(runtime: Runtime, where: Addressed) -> PendingOut:
    requests = await where.session.pending()
    proposals = await where.session.confirmations(ConfirmationStatus.PENDING)
    allowed = {
        (p.kind, p.turn_id, p.request_id)
        for p in await hooked(runtime.answerable(where.caller.principal))
        if p.session == where.stored
    }
    waiting = [
        PendingInputOut.model_validate(
            {
                "turn_id": request.turn_id,
                "input_id": request.id,
                "prompt": request.prompt,
                "schema": request.json_schema,
                "answerers": answerers_json(request.answerers),
                "digest": request.digest,
                "tool": request.tool,
                "expires_at": request.expires_at,
                "may_answer": ("input", request.turn_id, request.id) in allowed,
                "votes": await _votes(where, "input", request.turn_id, request.id),
            }
        )
        for request in requests
    ]
    return PendingOut(
        session=where.key,
        input=waiting[0] if waiting else None,
        inputs=waiting,
        confirmations=[
            PendingConfirmationOut(
                confirmation_id=p.confirmation_id,
                turn_id=p.turn_id,
                tool=p.tool,
                arguments=p.arguments,
                prompt=p.prompt,
                details=p.details,
                answerers=answerers_json(p.answerers),
                digest=confirmation_digest(p),
                created_at=p.created_at,
                expires_at=p.expires_at,
                may_answer=("confirm", p.turn_id, p.confirmation_id) in allowed,
                votes=await _votes(where, "confirm", p.turn_id, p.confirmation_id),
                editable=_editable(where, p),
            )
            for p in proposals
        ],
    )


def _editable(where: Addressed, proposal: ConfirmationRecord) -> list[str] | None:
    """What an approval may change: the tool's `editable` arguments, unless several must
    approve (one of them cannot change what the others approve)."""
    tool = where.session.agent.tool_named(proposal.tool)
    if tool is None or not tool.editable or isinstance(proposal.answerers, QuorumAnswerer):
        return None
    return list(tool.editable)


async def _votes(
    where: Addressed, kind: Literal["input", "confirm"], turn_id: str, request_id: str
) -> VotesOut | None:
    return votes_out(await where.session.tally(kind, turn_id, request_id))


def votes_out(tally: Tally | None) -> VotesOut | None:
    if tally is None:
        return None
    return VotesOut(
        need=tally.need,
        approved_by=list(tally.approved_by),
        denied_by=list(tally.denied_by),
        outcome=tally.outcome,
        counted=tally.counted,
    )


def answerers_json(answerers: Answerer | None) -> dict[str, Any] | None:
    return None if answerers is None else answerers.model_dump(mode="json")
