"""Standing grants over HTTP ("Approve, and allow this again"): the confirm body's
`allow_again`, the workspace's live grants, and revoking one.

Each is the engine's own call with the token's principal, as Slack's modal and Home tab make
it, so the API can neither grant nor revoke more than Slack: the grant is issued by
`session.confirm(allow_again=)` (refused with a 422 and nothing applied where the engine will
not issue it), listed by `standing_grants` (the principal's workspace only), and revoked by
`revoke_grant` as the token's person (the granter, the person it covers, or whom the agent's
`authorize_answer` admits for policy `GRANTS_POLICY`; 403 otherwise). A grant of another
workspace is a 404, as an unknown id is: its existence is not revealed.
"""

from __future__ import annotations

from agent import (
    Agent,
    AllowAgain,
    GrantRecord,
    GrantScope,
    ResumeAuthorizationError,
    Runtime,
    revoke_grant,
    standing_grants,
)
from bot.api.addressed import Addressed, hooked
from bot.api.auth import Caller
from bot.api.errors import ApiError
from bot.api.schemas import AllowAgainBody, GrantOut, GrantsOut


def allow_again(body: AllowAgainBody | None) -> AllowAgain | None:
    """The engine's `AllowAgain` for the body's; the body's own rules are the engine's (a
    positive, finite span), so this never fails on what the body let through."""
    if body is None:
        return None
    return AllowAgain(scope=GrantScope(body.scope), seconds=body.seconds)


def grant_out(grant: GrantRecord) -> GrantOut:
    return GrantOut(
        grant_id=grant.grant_id,
        tool=grant.tool,
        team=grant.team,
        enterprise=grant.enterprise,
        scope=grant.scope.value,
        session=grant.session,
        channel=grant.channel,
        speaker=grant.speaker,
        granted_by=grant.granted_by,
        confirmation_id=grant.confirmation_id,
        created_at=grant.created_at,
        expires_at=grant.expires_at,
        revoked_at=grant.revoked_at,
        revoked_by=grant.revoked_by,
    )


async def issued(where: Addressed, confirmation_id: str) -> GrantOut | None:
    """The grant the approval of `confirmation_id` just issued (one per approval), so the
    caller has its id to revoke it by; None if it is no longer live (revoked meanwhile)."""
    runtime = where.session.runtime
    live = await standing_grants(runtime.store, where.caller.principal, now=runtime.clock())
    for grant in live:
        if grant.session == where.stored and grant.confirmation_id == confirmation_id:
            return grant_out(grant)
    return None


async def listed(runtime: Runtime, caller: Caller) -> GrantsOut:
    """The grants live now in the caller's workspace, newest first: every person's, as the
    Home tab shows an admin (a grant says who it covers and who granted it; revoking one is
    what is checked)."""
    live = await standing_grants(runtime.store, caller.principal, now=runtime.clock())
    return GrantsOut(grants=[grant_out(grant) for grant in live])


async def revoke(runtime: Runtime, agent: Agent, caller: Caller, grant_id: str) -> GrantOut:
    """Revoke as the token's person; the grant as stored after (a second revocation changes
    nothing and answers with the first)."""
    try:
        revoked = await hooked(
            revoke_grant(
                runtime.store,
                grant_id,
                by=caller.user,
                principal=caller.principal,
                authorize_answer=agent.authorize_answer,
                now=runtime.clock(),
            )
        )
    except ResumeAuthorizationError as err:
        raise ApiError(403, f"you can't revoke this grant: {err}") from None
    return grant_out(revoked)
