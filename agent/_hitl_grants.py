"""Standing grants: "Approve, and allow this again" (the store's role: `agent._grant_seam`).

Whoever approves a proposed write of a tool that allows it (`@tool(grantable_for=seconds)`) may
pass `allow_again` (scope: this thread or this channel; for at most the tool's limit). The grant
is issued once the approval is recorded, with an id derived from the approval, so an answer
retried after a crash issues the same grant, and a crash between the two loses only the grant
(the next call is asked again: the safe way to fail). It covers later calls of that tool from
the same speaker (the attested person the approved call was for), in the same workspace and
scope, until it expires or is revoked; such a call runs approved by it
(`agent._hitl_automatic`), and the timeline says which grant let it.

Refused with `ResumeValidationError` (422) and nothing applied: a Deny with `allow_again`, a
tool that does not allow grants, a longer time than it allows, a request that needs several
approvals (one voter must not waive the others), a turn with no attested speaker (whose calls
would it cover?), a channel grant where the turn names no channel.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent._errors import GrantNotFoundError, ResumeAuthorizationError, ResumeValidationError
from agent._grant_seam import GrantRecord, Grants, GrantScope
from agent._hitl_answerers import QuorumAnswerer
from agent._hitl_checks import AuthorizeAnswer, Principal, workspace_of
from agent._tool_turn import ToolTurn
from agent._tools import Tool
from agent._turn_input import TurnInput
from agent.seams import ConfirmationRecord

GRANTS_POLICY = "grants"
"""The policy `authorize_answer` is asked about when someone other than the granter or the
person it covers revokes a grant (`scope`: the tool): an admin's rule."""


class AllowAgain(BaseModel):
    """What an approver chose with "Approve, and allow this again"."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scope: GrantScope
    seconds: float = Field(gt=0, allow_inf_nan=False)


def grant_id_for(session: str, confirmation_id: str) -> str:
    digest = hashlib.sha256(f"{session}\n{confirmation_id}".encode()).hexdigest()
    return f"g_{digest[:20]}"


def check_allow_again(
    allow: AllowAgain,
    *,
    accepted: bool,
    record: ConfirmationRecord,
    tool: Tool | None,
    proposing: TurnInput | None,
) -> tuple[str, str | None]:
    """The speaker the grant would cover and the channel it names; raises if it cannot be."""
    if not accepted:
        raise ResumeValidationError("only an approval can allow a tool again, not a denial")
    limit = tool.grantable_for if tool is not None else None
    if limit is None:
        raise ResumeValidationError(f"{record.tool} does not allow approving it again ahead")
    if allow.seconds > limit:
        raise ResumeValidationError(
            f"{record.tool} may be allowed again for at most {_span(limit)}, "
            f"not {_span(allow.seconds)}"
        )
    if isinstance(record.answerers, QuorumAnswerer):
        raise ResumeValidationError(
            "this request needs several approvals; one of them cannot allow it again"
        )
    inbound = proposing.inbound if proposing is not None else None
    speaker = inbound.user if inbound is not None else None
    if speaker is None or not speaker.attested:
        raise ResumeValidationError(
            "nobody verified asked for this call, so there is no one a grant could cover"
        )
    channel = inbound.context.get("channel") if inbound is not None else None
    if allow.scope == GrantScope.CHANNEL and not channel:
        raise ResumeValidationError("this conversation has no channel to allow it in")
    return speaker.id, str(channel) if channel else None


async def issue_standing_grant(
    store: Grants,
    allow: AllowAgain,
    *,
    record: ConfirmationRecord,
    proposing: TurnInput | None,
    speaker: str,
    channel: str | None,
    by: str,
    now: float,
) -> GrantRecord:
    workspace = workspace_of(proposing)
    return await store.add_grant(
        GrantRecord(
            grant_id=grant_id_for(record.session, record.confirmation_id),
            tool=record.tool,
            team=workspace.get("team", ""),
            enterprise=workspace.get("enterprise"),
            scope=allow.scope,
            session=record.session,
            channel=channel if allow.scope == GrantScope.CHANNEL else None,
            speaker=speaker,
            granted_by=by,
            confirmation_id=record.confirmation_id,
            created_at=now,
            expires_at=now + allow.seconds,
        )
    )


async def covering_grant(turn: ToolTurn, tool: Tool) -> GrantRecord | None:
    """A live grant that lets this call of `tool` run without asking, if one does. A tool that
    no longer allows grants is covered by none, whatever was granted while it did."""
    if tool.grantable_for is None:
        return None
    inbound = turn.turn.input.inbound
    speaker = inbound.user if inbound is not None else None
    if inbound is None or speaker is None or not speaker.attested:
        return None
    workspace = workspace_of(turn.turn.input)
    if not workspace.get("team"):
        return None
    channel = inbound.context.get("channel")
    return await turn.env.store.find_grant(
        tool=tool.name,
        team=workspace["team"],
        enterprise=workspace.get("enterprise"),
        speaker=speaker.id,
        session=turn.session,
        channel=str(channel) if channel else None,
        now=turn.env.clock(),
    )


def grant_reason(grant: GrantRecord) -> str:
    where = "this thread" if grant.scope == GrantScope.THREAD else f"channel {grant.channel}"
    return f"{grant.granted_by} allowed {grant.tool} again in {where} (grant {grant.grant_id})"


async def standing_grants(
    store: Grants, principal: Principal | None, *, now: float
) -> list[GrantRecord]:
    """The grants live now in this person's workspace (all of them for no principal: an
    operator's view), newest first."""
    team = principal.get("team") if principal is not None else None
    if principal is not None and not team:
        return []
    grants = await store.list_grants(team=team, live_at=now)
    if principal is None:
        return grants
    return [g for g in grants if g.enterprise == principal.get("enterprise")]


async def revoke_grant(
    store: Grants,
    grant_id: str,
    *,
    by: str,
    principal: Principal | None,
    authorize_answer: AuthorizeAnswer | None,
    now: float,
) -> GrantRecord:
    """Revoke a grant at once: for the person who granted it, the person it covers, or whom
    `authorize_answer` admits for policy `GRANTS_POLICY`; only inside its workspace."""
    grant = await store.get_grant(grant_id)
    workspace = _workspace(grant)
    if grant is None or (principal is not None and not _same(workspace, principal)):
        raise GrantNotFoundError(f"no standing grant {grant_id!r} here")
    if by not in (grant.granted_by, grant.speaker):
        asked: Any = {
            "policy": GRANTS_POLICY,
            "scope": grant.tool,
            "by": by,
            "principal": principal or {},
        }
        if authorize_answer is None or not await authorize_answer(asked):
            raise ResumeAuthorizationError(
                "only the person who granted it, the person it covers, or an admin can revoke it"
            )
    revoked = await store.revoke_grant(grant_id, by=by, now=now)
    if revoked is None:  # pragma: no cover - it was there a moment ago; grants are not deleted
        raise GrantNotFoundError(f"no standing grant {grant_id!r} here")
    return revoked


def _workspace(grant: GrantRecord | None) -> dict[str, str]:
    if grant is None:
        return {}
    found = {"team": grant.team}
    if grant.enterprise:
        found["enterprise"] = grant.enterprise
    return found


def _same(workspace: dict[str, str], principal: Principal) -> bool:
    return principal.get("team") == workspace.get("team") and principal.get(
        "enterprise"
    ) == workspace.get("enterprise")


def _span(seconds: float) -> str:
    if math.isinf(seconds):
        return "ever"
    for unit, size in (("day", 86_400), ("hour", 3_600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"
