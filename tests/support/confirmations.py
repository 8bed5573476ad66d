"""Approving proposed writes in tests. A write tool never writes in the turn that proposes it:
a person confirms first. So a test about what a write does proposes it, approves it as the host
would (`session.confirm`), and reads the turn that acted on the approval."""

from __future__ import annotations

from agent import AgentSession, ConfirmationStatus, InboundEvent, TurnInput, TurnResult


async def approve_pending(session: AgentSession, *, by: str | None = None) -> list[TurnResult]:
    """Approve every pending confirmation of the session, oldest first, and wait for each turn
    that acts on one (one at a time, as a person clicking would)."""
    store = session.runtime.store
    results = []
    for pending in await store.list_confirmations(session.key, ConfirmationStatus.PENDING):
        follow_up = await session.confirm(pending.confirmation_id, True, by=by)
        results.append(await session.result(follow_up))
    return results


async def turn_and_approve(
    session: AgentSession,
    input: str | TurnInput | InboundEvent,
    *,
    turn_id: str | None = None,
    by: str | None = None,
) -> TurnResult:
    """`session.turn(input)`, then approve what it proposed. Returns the result of the last turn
    that acted on an approval, or the turn's own when it proposed nothing."""
    proposed = await session.turn(input, turn_id=turn_id)
    acted = await approve_pending(session, by=by)
    return acted[-1] if acted else proposed
