"""Approval by policy for a parked request: the agent's `approve_automatically` rule is shown a
yes-or-no `ctx.request_input` (`kind` "input") before the turn parks, and may answer it yes:
the turn never parks, the answer and an `approval.automatic` event (with `input_id`) are
committed first, the call runs again from the top as after a resume (what follows the answer
runs once), and the model reads which policy answered and why. A request with a schema of its
own, a `Quorum`'s, or one the rule declines waits for a person as before; a rule that fails
approves nothing. On every store."""

from __future__ import annotations

import asyncio
from typing import Any

from agent import (
    Agent,
    ApprovedByPolicy,
    PolicyApproval,
    ProposedWrite,
    Quorum,
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

PAID: list[str] = []
ASKED: list[str] = []
"""Every time a tool reached its `request_input` (it runs again after each answer)."""


@tool
async def restock(item: str, ctx: ToolContext) -> dict[str, Any]:
    """Restock an item once someone says yes (what follows the answer runs once)."""
    ASKED.append(item)
    if await ctx.request_input(id="restock", prompt=f"Restock {item}?") is not True:
        return {"restocked": False}
    PAID.append(item)
    return {"restocked": item}


@tool
async def pick_count(item: str, ctx: ToolContext) -> Any:
    """Ask how many to order (a number, not a yes or no)."""
    return await ctx.request_input(id="count", prompt="How many?", schema={"type": "integer"})


@tool
async def wire(item: str, ctx: ToolContext) -> Any:
    """Two people must approve."""
    return await ctx.request_input(
        id="wire", prompt="Wire it?", answerers=Quorum(2, users=["UA", "UB"])
    )


class Restocks:
    """Says yes to restocking mugs; remembers what it was shown."""

    def __init__(self, *, fails: bool = False) -> None:
        self.shown: list[ProposedWrite] = []
        self.fails = fails

    async def __call__(self, proposal: ProposedWrite) -> PolicyApproval | None:
        self.shown.append(proposal)
        if self.fails:
            raise RuntimeError("boom")
        if proposal.kind == "input" and proposal.arguments.get("item") == "mug":
            return PolicyApproval(policy="restock-mugs", reason="mugs are always restocked")
        return None


def _runtime(store: SessionStore, rule: Restocks, name: str, item: str) -> tuple[Runtime, Agent]:
    agent = Agent(
        name="ops",
        instructions="x",
        tools=[restock, pick_count, wire],
        approve_automatically=rule,
    )
    call = ToolCall(id="c1", name=name, input={"item": item})
    model = ScriptedModel([ScriptedReply(tool_calls=[call]), ScriptedReply(text="done")])
    return Runtime(store, model, agent=agent, poll_interval=0.02), agent


async def test_the_rule_answers_a_yes_or_no_request_and_the_turn_never_parks(
    store: SessionStore,
) -> None:
    PAID.clear()
    ASKED.clear()
    rule = Restocks()
    rt, agent = _runtime(store, rule, "restock", "mug")
    try:
        session = rt.session(agent, "s1")
        done = await session.result(await session.start(slack_event("restock mugs")))
        assert done.status == TurnStatus.COMPLETED, done
        events = await store.read_events("s1")
        transcript = await session.transcript()
    finally:
        await rt.close()
    assert PAID == ["mug"]  # what follows the answer, once
    assert ASKED == ["mug", "mug"]  # asked, answered by the rule, run again from the top
    assert not [e for e in events if e.type in ("input.requested", "turn.suspended")]
    [approved] = [e for e in events if isinstance(e, ApprovedByPolicy)]
    assert (approved.input_id, approved.confirmation_id) == ("restock", None)
    assert (approved.policy, approved.reason) == ("restock-mugs", "mugs are always restocked")
    [shown] = rule.shown
    assert (shown.kind, shown.input_id, shown.prompt) == ("input", "restock", "Restock mug?")
    assert (shown.tool, shown.asked_by) == ("restock", "U1")
    [result] = [m for m in transcript if isinstance(m, ToolMessage)]
    assert "policy restock-mugs answered yes automatically" in (result.note or "")


async def test_what_the_rule_declines_or_may_not_answer_waits_for_a_person(
    store: SessionStore,
) -> None:
    for name, item, rule in (
        ("restock", "kettle", Restocks()),  # declined
        ("restock", "mug", Restocks(fails=True)),  # a failing rule approves nothing
        ("pick_count", "mug", Restocks()),  # not a yes or no: never shown
        ("wire", "mug", Restocks()),  # a quorum's: never shown
    ):
        PAID.clear()
        rt, agent = _runtime(store, rule, name, item)
        key = f"s-{name}-{item}-{rule.fails}"
        try:
            session = rt.session(agent, key)
            done = await session.result(await session.start(slack_event("go")))
            events = await store.read_events(key)
        finally:
            await rt.close()
        assert done.status == TurnStatus.SUSPENDED, (name, item, done)
        assert [e.type for e in events if e.type == "approval.automatic"] == []
        assert PAID == []
        assert len(rule.shown) == (1 if name == "restock" else 0)


async def test_a_worker_dying_after_the_answer_replays_it_without_asking_again(
    store: SessionStore,
) -> None:
    PAID.clear()
    rule = Restocks()
    rt, agent = _runtime(store, rule, "restock", "mug")
    await rt.close()
    dying = DiesBeforeStep(store, "answer:")
    first = Runtime(dying, rt.model, agent=agent, poll_interval=0.02, lease_ttl=0.5)  # type: ignore[arg-type]
    async with first:
        turn = await first.session(agent, "s1").start(slack_event("restock mugs"))
        async with asyncio.timeout(30):
            await dying.reached.wait()
        await first.close(grace=0.01)
    second = Runtime(store, rt.model, agent=agent, poll_interval=0.02, recovery_interval=0.05)
    async with second:
        async with asyncio.timeout(30):
            done = await second.session(agent, "s1").result(turn)
        events = await store.read_events("s1")
    assert done.status == TurnStatus.COMPLETED, done
    assert len(rule.shown) == 1, "the recorded answer was replayed, not asked for again"
    assert PAID == ["mug"]
    assert not [e for e in events if e.type == "input.requested"]
