"""Deny with a reason: what a person says with an answer reaches the model, whatever the tool
does with the answer; it is stored with the answer, scrubbed and bounded. Runs on every store."""

from __future__ import annotations

from typing import Any

import pytest

from agent import (
    Agent,
    ConfirmationResolved,
    InputResolved,
    ResumeAuthorizationError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TriggerMessage,
    TurnStatus,
    tool,
)
from agent._hitl_answer_notes import MAX_REASON_CHARS
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event

SECRET = "hunter2-hunter2-hunter2"


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, **kw: Any) -> Runtime:
    return Runtime(
        store,
        model,
        agent=agent,
        poll_interval=0.02,
        recovery_interval=0.05,
        secrets=[SECRET],
        **kw,
    )


def _results(model: ScriptedModel, step: int) -> list[ToolMessage]:
    return [m for m in model.requests[step].messages if isinstance(m, ToolMessage)]


async def test_a_reason_given_with_an_answer_reaches_the_model(store: SessionStore) -> None:
    seen: list[str | None] = []

    @tool
    async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
        """Refund an order once a person approves."""
        approved = await ctx.request_input(id="approve-refund", prompt="Refund?")
        seen.append(ctx.answer_reason("approve-refund"))
        return {"refunded": approved is True}

    agent = Agent(name="ops", instructions="Refund orders.", tools=[issue_refund])
    model = refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        with pytest.raises(ResumeAuthorizationError):
            await session.resume("T1", "approve-refund", False, by="U2", reason="not mine")
        await session.resume(
            "T1", "approve-refund", False, by="U1", reason=f"  wrong amount, token {SECRET}  "
        )
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
        steps = await session.steps("T1")

    said = "wrong amount, token [redacted]"
    assert seen == [said]
    [result] = _results(model, 1)
    assert result.result == {"refunded": False}, "the tool's own result is unchanged"
    assert result.note == f"The answer to 'approve-refund' came with a reason from U1: {said}"
    assert steps["answer:T1:approve-refund"] == {"outcome": "answered", "by": "U1", "reason": said}
    resolved = [e for e in await store.read_events("s1") if isinstance(e, InputResolved)]
    assert [(e.outcome, e.by, e.reason) for e in resolved] == [("answered", "U1", said)]


async def test_an_answer_without_a_reason_stores_what_it_always_stored(
    store: SessionStore,
) -> None:
    agent, model = refund_agent(), refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        await session.resume("T1", "approve-refund", True, by="U1", reason="   ")
        await session.result("T1")
        steps = await session.steps("T1")
    assert not any(step.startswith("answer:") for step in steps)
    [result] = _results(model, 1)
    assert result.note is None


async def test_a_long_reason_is_cut(store: SessionStore) -> None:
    agent, model = refund_agent(), refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        await session.resume("T1", "approve-refund", False, by="U1", reason="no " * 400)
        await session.result("T1")
        note = (await session.steps("T1"))["answer:T1:approve-refund"]
    assert isinstance(note, dict)
    reason = note["reason"]
    assert isinstance(reason, str)
    assert len(reason) == MAX_REASON_CHARS
    assert reason.endswith("…")


async def test_the_reason_is_stored_with_the_answer_and_replays_identically(
    store: SessionStore,
) -> None:
    """Answered where no turn runs (a web process), run by another runtime: the note is read
    off the store, not carried in memory."""
    agent = refund_agent()
    async with _runtime(store, agent, refund_model()) as rt:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund"), turn_id="T1"))
    web = _runtime(store, agent, refund_model(), run_turns=False)
    await web.session(agent, "s1").resume("T1", "approve-refund", False, by="U1", reason="later")
    await web.close()
    model = refund_model()
    async with _runtime(store, agent, model) as worker:
        result = await worker.session(agent, "s1").result("T1")
    assert result.status == TurnStatus.COMPLETED
    [tool_result] = _results(model, 0)
    assert tool_result.note == "The answer to 'approve-refund' came with a reason from U1: later"


async def test_a_denial_with_a_reason_is_quoted_to_the_model_of_the_follow_up(
    store: SessionStore,
) -> None:
    @tool(effect="write", confirmation="required")
    async def wire(to: str) -> dict[str, str]:
        """Wire money."""
        raise AssertionError("a denied write never runs")

    agent = Agent(name="a", instructions="x", tools=[wire])
    model = ScriptedModel(
        turns=[
            [
                ScriptedReply(tool_calls=[ToolCall(id="c1", name="wire", input={"to": "bob"})]),
                ScriptedReply(text="asked"),
            ],
            [ScriptedReply(text="Understood, not wiring.")],
        ]
    )
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("wire bob"), turn_id="T1")
        [proposal] = await session.confirmations()
        follow_up = await session.confirm(
            proposal.confirmation_id, False, by="U1", reason=f"bob is not a vendor ({SECRET})"
        )
        assert (await session.result(follow_up)).text == "Understood, not wiring."
        [answered] = await session.confirmations()

    said = "bob is not a vendor ([redacted])"
    opening = model.requests[-1].messages[-1]
    assert isinstance(opening, TriggerMessage)
    assert opening.text == (
        'U1 denied the proposed call wire({"to": "bob"}). It did not run and must not be '
        f"retried without a new request. Their reason: {said}"
    )
    assert (answered.status, answered.by, answered.reason) == ("denied", "U1", said)
    resolved = [e for e in await store.read_events("s1") if isinstance(e, ConfirmationResolved)]
    assert [(e.outcome, e.by, e.reason) for e in resolved] == [("denied", "U1", said)]
