"""Reminders and escalation of requests nobody answers: durable timers committed with the
request, fired once each by whichever process sweeps first, and an escalation that lets its
answerers answer from the moment it fired (never before), by every answer path.

Runs on every store; two runtimes racing on one database on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    Agent,
    ApprovalEscalated,
    ApprovalReminded,
    AssemblyError,
    ConfirmationStatus,
    Principal,
    ResumeAuthorizationError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    TriggerMessage,
    TurnStatus,
    UserAnswerer,
    tool,
)
from storage import SqlStore
from tests.support.hitl_fixtures import slack_event

START = 1_000_000.0
HOUR = 3600.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, clock: Clock) -> Runtime:
    """Not entered: no recovery sweep races the test's own `expire_due` calls."""
    return Runtime(store, model, agent=agent, clock=clock, poll_interval=0.02, lease_ttl=1e9)


def _wire_agent(ran: list[str], **kw: Any) -> Agent:
    @tool(
        effect="write",
        confirmation="required",
        remind_after=HOUR,
        escalate_after=(2 * HOUR, {"user": "UBOSS"}),
        **kw,
    )
    async def wire(to: str, ctx: ToolContext) -> dict[str, str]:
        """Wire money."""
        ran.append(to)
        return {"wired": to}

    return Agent(name="a", instructions="x", tools=[wire])


def _wire_model() -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
        if isinstance(opening, TriggerMessage):
            return ScriptedReply(text="Wired." if "approved" in opening.text else "Not wired.")
        if step == 0:
            return ScriptedReply(tool_calls=[ToolCall(id="c1", name="wire", input={"to": "bob"})])
        return ScriptedReply(text="asked")

    return ScriptedModel(responder=respond)


def _follow_ups(events: list[Any]) -> list[tuple[str, str]]:
    return [
        (e.type, e.request_id)
        for e in events
        if isinstance(e, ApprovalReminded | ApprovalEscalated)
    ]


async def test_a_proposal_is_reminded_then_escalated_once_and_the_boss_may_answer(
    store: SessionStore,
) -> None:
    ran: list[str] = []
    clock, agent = Clock(), _wire_agent(ran)
    rt = _runtime(store, agent, _wire_model(), clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("wire bob"), turn_id="T1"))
        [proposal] = await session.confirmations()
        cid = proposal.confirmation_id

        # Not yet escalated: the boss is refused, by the answer path and the inbox alike.
        boss = Principal(user="UBOSS", team="T1")
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(cid, True, by="UBOSS", principal=boss)
        assert await rt.answerable(boss) == []

        clock.now = START + HOUR - 1
        await rt.expire_due()
        assert _follow_ups(await store.read_events("s1")) == []
        clock.now = START + HOUR
        assert await rt.expire_due() == 0, "a reminder is not an expiry"
        [reminded] = [e for e in await store.read_events("s1") if e.type == "approval.reminded"]
        assert isinstance(reminded, ApprovalReminded)
        assert (reminded.kind, reminded.waited) == ("confirmation", HOUR)
        assert reminded.answerers == UserAnswerer(user="U1"), "the speaker is reminded"
        await rt.expire_due()
        assert _follow_ups(await store.read_events("s1")) == [("approval.reminded", cid)]
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(cid, True, by="UBOSS", principal=boss)

        clock.now = START + 2 * HOUR
        await rt.expire_due()
        await rt.expire_due()
        assert _follow_ups(await store.read_events("s1")) == [
            ("approval.reminded", cid),
            ("approval.escalated", cid),
        ]
        [listed] = await rt.answerable(boss)
        assert (listed.request_id, listed.escalated_to) == (cid, (UserAnswerer(user="UBOSS"),))
        assert await rt.answerable(Principal(user="UBOSS", team="T2")) == [], "other workspace"

        await session.confirm(cid, True, by="UBOSS", principal=boss)
        follow_up = await session.result(f"confirm:{cid}")
        assert (follow_up.status, follow_up.text) == (TurnStatus.COMPLETED, "Wired."), (
            follow_up.error
        )
        assert ran == ["bob"]
        [answered] = await session.confirmations()
        assert (answered.status, answered.by) == (ConfirmationStatus.ACCEPTED, "UBOSS")
        assert await store.due_timers(START + 1e6) == [], "its end took every timer"
    finally:
        await rt.close()


async def test_the_asker_still_answers_after_an_escalation(store: SessionStore) -> None:
    ran: list[str] = []
    clock, agent = Clock(), _wire_agent(ran)
    rt = _runtime(store, agent, _wire_model(), clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("wire bob"), turn_id="T1"))
        [proposal] = await session.confirmations()
        clock.now = START + 3 * HOUR
        await rt.expire_due()
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(proposal.confirmation_id, True, by="UEVE")
        await session.confirm(proposal.confirmation_id, False, by="U1")
        [denied] = await session.confirmations()
        assert (denied.status, denied.by) == (ConfirmationStatus.DENIED, "U1")
        assert ran == []
    finally:
        await rt.close()


def _asking_agent(**asked: Any) -> Agent:
    @tool
    async def ask(ctx: ToolContext) -> dict[str, Any]:
        """Ask a person."""
        answer = await ctx.request_input(id="ok", prompt="Go ahead?", **asked)
        return {"answer": answer}

    return Agent(name="a", instructions="x", tools=[ask])


def _asking_model() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c1", name="ask", input={})]),
            ScriptedReply(text="done"),
        ]
    )


async def test_a_parked_request_escalates_to_a_list_and_follow_ups_past_expiry_are_skipped(
    store: SessionStore,
) -> None:
    clock = Clock()
    agent = _asking_agent(
        remind_after=5 * HOUR,  # after its expiry: never written
        escalate_after=(HOUR, ["UB1", "UB2"]),
        expires_after=4 * HOUR,
    )
    rt = _runtime(store, agent, _asking_model(), clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("ask"), turn_id="T1"))
        assert [t.action.value for t in await store.due_timers(START + 1e6)] == [
            "escalate",
            "expire",
        ]
        with pytest.raises(ResumeAuthorizationError):
            await session.resume("T1", "ok", True, by="UB2")
        clock.now = START + HOUR
        await rt.expire_due()
        await session.resume("T1", "ok", True, by="UB2")
        result = await session.result("T1")
        assert (result.status, result.text) == (TurnStatus.COMPLETED, "done")
        assert _follow_ups(await store.read_events("s1")) == [("approval.escalated", "ok")]
    finally:
        await rt.close()


async def test_a_bad_declaration_is_refused_where_it_is_made(store: SessionStore) -> None:
    with pytest.raises(AssemblyError, match="remind_after must be a positive"):

        @tool(effect="write", confirmation="required", remind_after=-1)
        async def wire(to: str) -> None:
            """Wire."""

    with pytest.raises(AssemblyError, match="cannot need several approvals"):

        @tool(
            effect="write",
            confirmation="required",
            escalate_after=(60, {"quorum": 2, "users": ["A", "B"]}),
        )
        async def wire2(to: str) -> None:
            """Wire."""

    with pytest.raises(AssemblyError, match="never asks"):

        @tool(remind_after=60)
        def look(order: str) -> str:
            """Look."""
            return order

    clock = Clock()
    agent = _asking_agent(escalate_after=(HOUR, {"nobody": 1}))
    model = _asking_model()
    rt = _runtime(store, agent, model, clock)
    try:
        session = rt.session(agent, "s1")
        result = await session.result(await session.start(slack_event("ask"), turn_id="T1"))
        assert result.status == TurnStatus.COMPLETED
        [tool_result] = [m for m in model.requests[1].messages if m.role == "tool"]
        assert tool_result.is_error
        assert "escalate_after: answerers must be" in str(tool_result.result)
        assert await store.due_timers(START + 1e6) == []
    finally:
        await rt.close()


async def test_two_runtimes_sweeping_at_once_fire_each_follow_up_once(sql_url: str) -> None:
    ran: list[str] = []
    clock, agent = Clock(), _wire_agent(ran)
    stores = [await SqlStore.open(sql_url) for _ in range(2)]
    runtimes = [_runtime(store, agent, _wire_model(), clock) for store in stores]
    try:
        session = runtimes[0].session(agent, "s1")
        await session.result(await session.start(slack_event("wire bob"), turn_id="T1"))
        clock.now = START + 3 * HOUR
        await asyncio.gather(*(r.expire_due() for r in (*runtimes, *runtimes)))
        assert [t for t, _ in _follow_ups(await stores[0].read_events("s1"))] == [
            "approval.reminded",
            "approval.escalated",
        ]
    finally:
        for runtime in runtimes:
            await runtime.close()
        for store in stores:
            await store.close()
