"""The answer endpoints: what waits on a session, answering a parked request, confirming a
proposed write. Each reaches the same engine call a Slack click does (grant, then `resume` /
`confirm` with the caller's principal), so the API can neither answer more nor less than Slack.

A request that needs several approvals (`Quorum`) takes the caller's answer as a vote: the
reply's `votes` says where it stands (`outcome` null: still waiting for others), and the turn
resumes (or the write's turn is queued) only once the votes decide.

A confirmation may carry `allow_again` ("Approve, and allow this again"): the engine issues a
standing grant with the approval, or refuses both (422, nothing applied); the reply names the
grant (`bot.api.grants`).
"""

from __future__ import annotations

from typing import Any, Literal

from agent import (
    Answerer,
    ConfirmationStatus,
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
            )
            for p in proposals
        ],
    )


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
