"""A step the store refuses because a row with its identity exists already.

Either it heals (the worker's view was stale: read the transcript again and go on) or it cannot
(the same input makes the same clash every time): then the turn fails with a reason a person can
read, and the session's next turn runs. It never loops. The commonest cause, a model reply that
reuses a tool call id of its turn (the confirmation id and the step id are keyed by it), is
refused before anything of the reply is committed or run."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    StepConflictError,
    ToolCall,
    TriggerMessage,
    TurnStatus,
    tool,
)
from agent.seams import NoMeter, TurnRun
from tests.support.engine_fixtures import HookedStore
from tests.support.hitl_fixtures import slack_event

WRITES: list[str] = []
"""Every refund the write tool really made."""
LOOKUPS: list[str] = []


@tool(effect="write", confirmation="required")
def refund(order_id: str) -> dict[str, Any]:
    """Refund an order (a person confirms first)."""
    WRITES.append(order_id)
    return {"refunded": order_id}


@tool
async def lookup(order_id: str) -> dict[str, Any]:
    """Read an order."""
    LOOKUPS.append(order_id)
    return {"order": order_id, "state": "shipped"}


AGENT = Agent(name="ops", instructions="x", tools=[refund, lookup])

AGAIN = [ToolCall(id="w2", name="refund", input={"order_id": "43"})]
"""What the follow-up's model asks at each step after the planned call: the same id twice."""
FOLLOW_UPS: dict[str, list[list[ToolCall]]] = {
    "a proposal repeated under its id": [AGAIN, AGAIN],
    "the planned call's own id echoed": [
        [ToolCall(id="w1_confirmed", name="refund", input={"order_id": "42"})]
    ],
    "one id twice in one reply": [
        [
            ToolCall(id="r1", name="lookup", input={"order_id": "1"}),
            ToolCall(id="r1", name="lookup", input={"order_id": "2"}),
        ]
    ],
}


def _model(follow_up: list[list[ToolCall]]) -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
        if isinstance(opening, TriggerMessage):  # step 0 is the planned call
            if step <= len(follow_up):
                return ScriptedReply(text=f"Step {step}.", tool_calls=follow_up[step - 1])
            return ScriptedReply(text="All done.")
        if "status" in opening.text:
            return ScriptedReply(text="It shipped.")
        if step == 0:
            return ScriptedReply(
                text="Proposing a refund.",
                tool_calls=[ToolCall(id="w1", name="refund", input={"order_id": "42"})],
            )
        return ScriptedReply(text="The refund awaits confirmation.")

    return ScriptedModel(responder=respond)


@pytest.mark.parametrize("shape", list(FOLLOW_UPS))
async def test_a_reply_reusing_a_call_id_of_its_turn_fails_the_turn_and_frees_the_session(
    store: SessionStore, shape: str
) -> None:
    WRITES.clear()
    LOOKUPS.clear()
    model = _model(FOLLOW_UPS[shape])
    async with Runtime(store, model, agent=AGENT, poll_interval=0.02) as rt:
        session = rt.session(AGENT, "s1")
        await session.turn(slack_event("refund order 42"), turn_id="T1")
        [proposal] = await session.confirmations()
        follow_up = await session.confirm(proposal.confirmation_id, True, by="U1")
        behind = await session.start(slack_event("status of order 42"), turn_id="T2")

        async with asyncio.timeout(30):
            failed = await session.result(follow_up)
            after = await session.result(behind)

        assert failed.status == TurnStatus.FAILED
        assert failed.error is not None
        assert "reuses the tool call id" in failed.error, failed.error
        assert "none of its calls ran" in failed.error
        assert (after.status, after.text) == (TurnStatus.COMPLETED, "It shipped.")
        assert WRITES == ["42"], "the approved call ran once, nothing else wrote"
        assert LOOKUPS == [], "no call of the refused reply ran"
        events = await store.read_events("s1")
        assert [e.error for e in events if e.type == "turn.failed"] == [failed.error]
        assert len(model.requests) < 10, "the refused reply was not asked for again and again"


class _Clash:
    """Refuses the commit of one step as a store does a duplicate key: `times` times."""

    def __init__(self, step: str, times: int) -> None:
        self.step = step
        self.left = times
        self.refused = 0

    def __call__(self, stage: str, label: str) -> None:
        if stage == "before" and label == self.step and self.left:
            self.left -= 1
            self.refused += 1
            raise StepConflictError(f"session 's1' already has step {label!r}")


LOOKUP_TURN = [
    ScriptedReply(
        text="Looking.", tool_calls=[ToolCall(id="l1", name="lookup", input={"order_id": "7"})]
    ),
    ScriptedReply(text="Order 7 shipped."),
]


class _Runs(NoMeter):
    def __init__(self) -> None:
        self.runs: list[TurnRun] = []

    def turn_ran(self, record: TurnRun) -> None:
        self.runs.append(record)


async def _run_with(
    store: SessionStore, clash: _Clash, meter: _Runs | None = None
) -> tuple[Any, Any, ScriptedModel]:
    model = ScriptedModel(LOOKUP_TURN)
    hooked: Any = HookedStore(store, clash)
    async with Runtime(hooked, model, agent=AGENT, poll_interval=0.02, meter=meter) as rt:
        session = rt.session(AGENT, "s1")
        first = await session.start(slack_event("look up 7"), turn_id="T1")
        behind = await session.start(slack_event("look up 7 again"), turn_id="T2")
        async with asyncio.timeout(30):
            return await session.result(first), await session.result(behind), model


async def test_a_conflict_that_clears_on_a_fresh_read_heals(store: SessionStore) -> None:
    LOOKUPS.clear()
    clash = _Clash("tool:1:l1", times=1)
    first, behind, _ = await _run_with(store, clash)
    assert clash.refused == 1
    assert (first.status, first.text) == (TurnStatus.COMPLETED, "Order 7 shipped.")
    assert behind.status == TurnStatus.COMPLETED
    assert [e.type for e in await store.read_events("s1")].count("turn.failed") == 0


async def test_a_conflict_that_comes_back_fails_the_turn_at_once(store: SessionStore) -> None:
    clash = _Clash("tool:1:l1", times=1000)
    meter = _Runs()
    first, behind, model = await _run_with(store, clash, meter)
    assert clash.refused == 2, "tried again once on a fresh read, then gave up"
    assert first.status == TurnStatus.FAILED
    assert first.error is not None
    assert "could not be saved" in first.error
    assert "tool:1:l1" not in first.error, "a reason for a person, not the store's key"
    assert (behind.status, behind.text) == (TurnStatus.COMPLETED, "Order 7 shipped.")
    assert len(model.requests) == 3, "one model step for the failed turn, two for the next"
    # The failure is counted and logged like any other: a run of T1 that failed.
    assert [(r.turn_id, r.outcome) for r in meter.runs] == [("T1", "failed"), ("T2", "completed")]
    assert meter.runs[0].error == "StepConflictError"
