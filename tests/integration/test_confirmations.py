"""Write confirmations: a proposed write is recorded, not run; only an allowed answer runs it,
once, with exactly the stored arguments."""

from __future__ import annotations

from typing import Any

import pytest

from agent import (
    Agent,
    ConfirmationStatus,
    ResumeAuthorizationError,
    ResumeConflictError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    TurnStatus,
    UserAnswerer,
    grant_confirmation,
    tool,
)
from tests.support.hitl_fixtures import slack_event

REFUNDS: list[dict[str, Any]] = []


@tool(effect="write", confirmation="required")
async def issue_refund(order_id: str, amount: float, ctx: Any) -> dict[str, Any]:
    """Refund an order (needs a person's confirmation)."""
    effect = await ctx.run_effect(
        f"refund:{order_id}", lambda auth: _refund(order_id, amount, auth.idempotency_key)
    )
    return {"refunded": effect.value}


async def _refund(order_id: str, amount: float, key: str) -> dict[str, Any]:
    REFUNDS.append({"order_id": order_id, "amount": amount, "key": key})
    return {"order_id": order_id, "amount": amount}


@tool
async def order_status(order_id: str) -> str:
    """A safe read."""
    return f"order {order_id} shipped"


def _model() -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
        if isinstance(opening, TriggerMessage):
            return ScriptedReply(text=f"Reported: {opening.text}")
        if "status" in opening.text:
            if step == 0:
                return ScriptedReply(
                    tool_calls=[ToolCall(id="s1", name="order_status", input={"order_id": "7"})]
                )
            return ScriptedReply(text="It shipped.")
        if step == 0:
            return ScriptedReply(
                text="I'll propose the refund.",
                tool_calls=[
                    ToolCall(id="w1", name="issue_refund", input={"order_id": "42", "amount": 30})
                ],
            )
        return ScriptedReply(text="The refund awaits confirmation.")

    return ScriptedModel(responder=respond)


def _agent(**kw: Any) -> Agent:
    return Agent(name="ops", instructions="x", tools=[issue_refund, order_status], **kw)


async def test_required_confirmation_end_to_end(store: SessionStore) -> None:
    REFUNDS.clear()
    agent = _agent()
    async with Runtime(store, _model(), agent=agent, poll_interval=0.02) as rt:
        session = rt.session(agent, "s1")
        proposed = await session.turn(slack_event("refund order 42", user="U1"), turn_id="T1")
        assert proposed.status == TurnStatus.COMPLETED
        assert REFUNDS == [], "the proposing turn must not run the write"
        tool_message = (await store.load_transcript("s1"))[2]
        assert isinstance(tool_message, ToolMessage)
        assert tool_message.result["status"] == "confirmation_pending"
        [pending] = await store.list_confirmations("s1")
        assert pending.status == ConfirmationStatus.PENDING
        assert pending.arguments == {"order_id": "42", "amount": 30}
        assert pending.answerers == UserAnswerer(user="U1")
        assert "confirmation.requested" in [e.type for e in await store.read_events("s1")]

        # an unrelated safe turn runs while the confirmation is pending
        status = await session.turn(slack_event("status of order 7", user="U1"))
        assert status.text == "It shipped."

        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(pending.confirmation_id, True, by="U666")
        assert REFUNDS == []

        follow_up = await session.confirm(pending.confirmation_id, True, by="U1")
        done = await session.result(follow_up)
        assert done.status == TurnStatus.COMPLETED
        assert REFUNDS == [{"order_id": "42", "amount": 30, "key": "issue_refund:refund:42"}]

        with pytest.raises(ResumeConflictError):
            await session.confirm(pending.confirmation_id, True, by="U1")
        with pytest.raises(ResumeConflictError):
            await session.confirm(pending.confirmation_id, False, by="U1")
        assert len(REFUNDS) == 1

        transcript = await store.load_transcript("s1")
        follow = [m for m in transcript if m.turn_id == follow_up]
        assert [m.role for m in follow] == ["trigger", "assistant", "tool", "assistant"]
        assert isinstance(follow[0], TriggerMessage)
        assert (follow[0].kind, follow[0].by) == ("confirmation", "U1")
        assert follow[1].tool_calls[0].input == {"order_id": "42", "amount": 30}
        [resolved] = await store.list_confirmations("s1")
        assert (resolved.status, resolved.by) == (ConfirmationStatus.ACCEPTED, "U1")
        types = [e.type for e in await store.read_events("s1")]
        assert "confirmation.resolved" in types


async def test_denied_confirmation_records_a_refusal(store: SessionStore) -> None:
    REFUNDS.clear()
    agent = _agent()
    async with Runtime(store, _model(), agent=agent, poll_interval=0.02) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("refund order 42", user="U1"))
        [pending] = await store.list_confirmations("s1")
        follow_up = await session.confirm(pending.confirmation_id, False, by="U1")
        done = await session.result(follow_up)
        assert done.status == TurnStatus.COMPLETED
        assert "denied" in done.text
        assert REFUNDS == []
        opening = next(m for m in await store.load_transcript("s1") if m.turn_id == follow_up)
        assert isinstance(opening, TriggerMessage)
        assert "denied" in opening.text
        [resolved] = await store.list_confirmations("s1")
        assert resolved.status == ConfirmationStatus.DENIED


async def test_policy_confirmation_needs_a_grant(store: SessionStore) -> None:
    REFUNDS.clear()

    async def authorize_answer(request: dict[str, Any]) -> bool:
        return request["by"] == "OPS" and request["scope"] == "billing"

    @tool(
        effect="write",
        confirmation="required",
        answerers={"policy": "operator", "scope": "billing"},
        name="issue_refund",
    )
    async def guarded_refund(order_id: str, amount: float, ctx: Any) -> dict[str, Any]:
        """Refund (operators confirm)."""
        effect = await ctx.run_effect(
            f"refund:{order_id}", lambda auth: _refund(order_id, amount, auth.idempotency_key)
        )
        return {"refunded": effect.value}

    agent = Agent(
        name="ops",
        instructions="x",
        tools=[guarded_refund, order_status],
        authorize_answer=authorize_answer,
    )
    async with Runtime(store, _model(), agent=agent, poll_interval=0.02) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("refund order 42", user="U1"))
        [pending] = await store.list_confirmations("s1")
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(pending.confirmation_id, True, by="OPS")  # by alone: no
        assert await grant_confirmation(session, pending.confirmation_id, by="U1") is None
        grant = await grant_confirmation(session, pending.confirmation_id, by="OPS")
        assert grant is not None
        follow_up = await session.confirm(pending.confirmation_id, True, by="OPS", granted=grant)
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        assert len(REFUNDS) == 1


async def test_a_reset_expires_pending_confirmations(store: SessionStore) -> None:
    REFUNDS.clear()
    agent = _agent()
    async with Runtime(store, _model(), agent=agent, poll_interval=0.02) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("refund order 42", user="U1"))
        [pending] = await store.list_confirmations("s1")
        await session.reset()
        with pytest.raises(ResumeConflictError):
            await session.confirm(pending.confirmation_id, True, by="U1")
        [expired] = await store.list_confirmations("s1")
        assert expired.status == ConfirmationStatus.EXPIRED
    assert REFUNDS == []
