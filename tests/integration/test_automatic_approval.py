"""Approval by policy, without a person (`Agent(approve_automatically=...)`): a proposed write
the rule approves runs at once in the same turn, recorded as approved by that policy with its
reason (the confirmation row, an `approval.automatic` event, a note the model reads), through
the same receipts; anything else, or a rule that fails, goes to a person as before; a worker
that dies after the approval replays it without asking the rule again. On every store."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agent import (
    Agent,
    ApprovedByPolicy,
    ConfirmationStatus,
    EffectAuthority,
    PolicyApproval,
    ProposedWrite,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    tool,
)
from tests.support.dying_store import DiesBeforeStep
from tests.support.hitl_fixtures import slack_event

PAID: list[tuple[str, float]] = []
"""What the provider paid: one entry per effect that really ran."""


@tool(effect="write", confirmation="required")
async def refund(order: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund an order (a person or a policy approves it first)."""

    async def pay(authority: EffectAuthority) -> dict[str, Any]:
        PAID.append((order, amount))
        return {"refund_id": f"R{len(PAID)}"}

    effect = await ctx.run_effect(f"refund:{order}", pay, payload={"amount": amount})
    return {"refunded": amount, "order": order, **effect.value}


class SmallRefunds:
    """A rule that approves refunds up to $5 (and, once `spent`, nothing more), and remembers
    everything it was shown."""

    def __init__(self, *, fails: bool = False, returns: Any = None, hangs: bool = False) -> None:
        self.shown: list[ProposedWrite] = []
        self.fails = fails
        self.hangs = hangs
        self.returns = returns
        self.spent = False

    async def __call__(self, proposal: ProposedWrite) -> PolicyApproval | None:
        self.shown.append(proposal)
        if self.fails:
            raise RuntimeError("db password hunter2 leaked")
        if self.hangs:
            await asyncio.Event().wait()
        if self.returns is not None:
            return self.returns  # type: ignore[no-any-return]
        amount = proposal.arguments.get("amount")
        if self.spent or not isinstance(amount, int | float) or amount > 5:
            return None
        return PolicyApproval(policy="small-refunds", reason=f"${amount} is under the $5 limit")


def _model(amount: float) -> ScriptedModel:
    call = ToolCall(id="w1", name="refund", input={"order": "42", "amount": amount})
    return ScriptedModel([ScriptedReply(tool_calls=[call]), ScriptedReply(text="done")])


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, **kw: Any) -> Runtime:
    return Runtime(store, model, agent=agent, poll_interval=0.02, **kw)


async def test_a_small_refund_from_a_schedule_runs_approved_by_policy(
    store: SessionStore,
) -> None:
    PAID.clear()
    rule = SmallRefunds()
    agent = Agent(name="ops", instructions="x", tools=[refund], approve_automatically=rule)
    model = _model(2.0)
    rt = _runtime(store, agent, model)
    try:
        session = rt.session(agent, "s1")
        # A scheduled turn: nobody spoke, so no person could be asked at all.
        turn = await session.receive("refund the $2 shipping fee", by="cron:daily")
        done = await session.result(turn)
        assert done.status == TurnStatus.COMPLETED, done
        [record] = await session.confirmations()
        events = await store.read_events("s1")
    finally:
        await rt.close()
    assert PAID == [("42", 2.0)]
    assert (record.status, record.by) == (ConfirmationStatus.ACCEPTED, "policy:small-refunds")
    assert record.reason == "$2.0 is under the $5 limit"
    assert record.follow_up_turn is None  # it ran in the proposing turn
    [shown] = rule.shown
    assert (shown.tool, shown.trigger_by) == ("refund", "cron:daily")
    assert shown.arguments == record.arguments
    assert shown.asked_by is None
    [approved] = [e for e in events if isinstance(e, ApprovedByPolicy)]
    assert (approved.policy, approved.call_id) == ("small-refunds", "w1")
    kinds = [e.type for e in events]
    assert kinds.index("approval.automatic") < kinds.index("action.completed")
    assert "confirmation.requested" not in kinds
    [result] = [m for m in model.requests[-1].messages if isinstance(m, ToolMessage)]
    assert not result.is_error
    assert result.result["refunded"] == 2.0  # type: ignore[index]
    assert result.note == (
        "Approved automatically by policy small-refunds: $2.0 is under the $5 limit"
    )


async def test_a_refund_over_the_limit_goes_to_the_person_who_asked(store: SessionStore) -> None:
    PAID.clear()
    rule = SmallRefunds()
    agent = Agent(name="ops", instructions="x", tools=[refund], approve_automatically=rule)
    rt = _runtime(store, agent, _model(50.0))
    try:
        session = rt.session(agent, "s1")
        turn = await session.start(slack_event("refund 42", user="U0"), turn_id="T1")
        await session.result(turn)
        [proposal] = await session.confirmations(ConfirmationStatus.PENDING)
        follow_up = await session.confirm(
            proposal.confirmation_id, True, principal={"team": "T1", "user": "U0"}
        )
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        [record] = await session.confirmations()
    finally:
        await rt.close()
    [shown] = rule.shown  # asked once, for the proposal; the approved call is not re-asked
    assert shown.asked_by == "U0"
    assert shown.workspace == {"team": "T1"}
    assert (record.status, record.by) == (ConfirmationStatus.ACCEPTED, "U0")
    assert PAID == [("42", 50.0)]


@pytest.mark.parametrize("broken", ["raises", "returns a dict", "hangs"])
async def test_a_rule_that_fails_approves_nothing_and_a_person_is_asked(
    store: SessionStore,
    broken: str,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    PAID.clear()
    monkeypatch.setattr("agent._hitl_automatic.HOOK_SECONDS", 0.2)
    rule = {
        "raises": SmallRefunds(fails=True),
        "returns a dict": SmallRefunds(returns={"policy": "small-refunds", "reason": "ok"}),
        "hangs": SmallRefunds(hangs=True),
    }[broken]
    agent = Agent(name="ops", instructions="x", tools=[refund], approve_automatically=rule)
    rt = _runtime(store, agent, _model(1.0))
    try:
        session = rt.session(agent, "s1")
        with caplog.at_level(logging.WARNING, logger="agent.approvals"):
            turn = await session.start(slack_event("refund 42", user="U0"), turn_id="T1")
            await session.result(turn)
        [proposal] = await session.confirmations()
    finally:
        await rt.close()
    assert proposal.status == ConfirmationStatus.PENDING
    assert PAID == []
    assert "a person is asked instead" in caplog.text
    assert "hunter2" not in caplog.text


async def test_a_worker_dying_after_the_approval_replays_it_without_asking_again(
    store: SessionStore,
) -> None:
    PAID.clear()
    rule = SmallRefunds()
    agent = Agent(name="ops", instructions="x", tools=[refund], approve_automatically=rule)
    dying = DiesBeforeStep(store, "tool:")
    first = _runtime(dying, agent, _model(2.0), lease_ttl=0.5)  # type: ignore[arg-type]
    async with first:
        session = first.session(agent, "s1")
        turn = await session.receive("refund the $2 fee", by="cron:daily")
        async with asyncio.timeout(30):
            await dying.reached.wait()
        await first.close(grace=0.01)
    # The refund is paid and counts against the rule now: asked again, it would say no.
    rule.spent = True
    second = _runtime(store, agent, _model(2.0), recovery_interval=0.05)
    async with second:
        async with asyncio.timeout(30):
            done = await second.session(agent, "s1").result(turn)
        records = await second.session(agent, "s1").confirmations()
    assert done.status == TurnStatus.COMPLETED, done
    assert len(rule.shown) == 1, "the recorded approval was replayed, not asked for again"
    assert [(r.status, r.by) for r in records] == [
        (ConfirmationStatus.ACCEPTED, "policy:small-refunds")
    ]
    assert PAID == [("42", 2.0)], "paid once: the receipt answered the replay"
