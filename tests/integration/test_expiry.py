"""Approval expiry: a durable timer per request with a time limit, applied by whichever process
sweeps first through the answer path, so the model reads that nobody answered.

Runs on every store; the restart and the two-process sweep on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from agent import (
    Agent,
    AssemblyError,
    ConfirmationResolved,
    ConfirmationStatus,
    InputResolved,
    RequestExpiredError,
    ResumeConflictError,
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
from storage import SqlStore
from tests.support.hitl_fixtures import make_refund_tool, refund_model, slack_event

START = 1_000_000.0


class Clock:
    """The runtime's clock, moved by the test: expiry is measured on it, never slept for."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, clock: Clock) -> Runtime:
    """Not entered: no recovery sweep races the test's own `expire_due` calls."""
    return Runtime(store, model, agent=agent, clock=clock, poll_interval=0.02, lease_ttl=1e9)


def _refund_agent(**kw: Any) -> Agent:
    return Agent(name="ops", instructions="Refund orders.", tools=[make_refund_tool()], **kw)


def _tool_results(model: ScriptedModel, step: int) -> list[ToolMessage]:
    return [m for m in model.requests[step].messages if isinstance(m, ToolMessage)]


async def test_an_expired_park_resumes_and_the_model_reads_that_it_expired(
    store: SessionStore,
) -> None:
    clock, agent, model = Clock(), _refund_agent(approval_expires_after=3600), refund_model()
    rt = _runtime(store, agent, model, clock)
    try:
        session = rt.session(agent, "s1")
        parked = await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        assert parked.request is not None
        assert parked.request.expires_at == START + 3600
        [pending] = await session.pending()
        assert pending.expires_at == START + 3600

        clock.now = START + 3599
        assert await rt.expire_due() == 0
        clock.now = START + 3600
        assert await rt.expire_due() == 1
        result = await session.result("T1")
        assert await rt.expire_due() == 0, "applied once"

        assert (result.status, result.text) == (TurnStatus.COMPLETED, "Refund done.")
        [expired] = _tool_results(model, 1)
        assert expired.is_error
        assert expired.result == {
            "error": "RequestExpiredError: nobody answered the request 'approve-refund' within "
            "1 hour: it expired"
        }
        assert expired.note is None, "the error says it; no note repeats it"
        with pytest.raises(ResumeConflictError):
            await session.resume("T1", "approve-refund", True, by="U1")
        resolved = [e for e in await store.read_events("s1") if isinstance(e, InputResolved)]
        assert [(e.input_id, e.outcome, e.by) for e in resolved] == [
            ("approve-refund", "expired", None)
        ]
    finally:
        await rt.close()


async def test_a_tool_that_catches_the_expiry_still_lets_the_model_read_it(
    store: SessionStore,
) -> None:
    @tool
    async def ask(ctx: ToolContext) -> dict[str, Any]:
        """Asks, and copes with nobody answering."""
        try:
            await ctx.request_input(id="go", prompt="Go?", expires_after=90)
        except RequestExpiredError:
            return {"status": "gave up"}
        return {"status": "answered"}

    clock = Clock()
    agent = Agent(name="a", instructions="x", tools=[ask])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={})]),
            ScriptedReply(text="ok"),
        ]
    )
    rt = _runtime(store, agent, model, clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("go?"), turn_id="T1"))
        clock.now = START + 90
        assert await rt.expire_due() == 1
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()
    [answer] = _tool_results(model, 1)
    assert answer.result == {"status": "gave up"}
    assert answer.note == "Nobody answered the request 'go' within 1 minute 30 seconds: it expired."


async def test_an_expired_confirmation_never_runs_and_the_model_reads_that_it_expired(
    store: SessionStore,
) -> None:
    ran: list[str] = []

    @tool(effect="write", confirmation="required", expires_after=600)
    async def wire(to: str, ctx: ToolContext) -> dict[str, str]:
        """Wire money."""
        ran.append(to)
        return {}

    clock = Clock()
    agent = Agent(name="a", instructions="x", tools=[wire], approval_expires_after=5)
    model = ScriptedModel(
        turns=[
            [
                ScriptedReply(tool_calls=[ToolCall(id="c1", name="wire", input={"to": "bob"})]),
                ScriptedReply(text="asked"),
            ],
            [ScriptedReply(text="It expired, nothing was wired.")],
        ]
    )
    rt = _runtime(store, agent, model, clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("wire bob"), turn_id="T1"))
        [proposal] = await session.confirmations()
        assert proposal.expires_at == START + 600, "the tool's limit, not the agent's"

        clock.now = START + 600
        assert await rt.expire_due() == 1
        follow_up = await session.result(f"confirm:{proposal.confirmation_id}")
        assert await rt.expire_due() == 0

        assert follow_up.text == "It expired, nothing was wired."
        assert ran == []
        [expired] = await session.confirmations()
        assert (expired.status, expired.by) == (ConfirmationStatus.EXPIRED, None)
        opening = model.requests[-1].messages[-1]
        assert isinstance(opening, TriggerMessage)
        assert opening.text == (
            'Nobody answered the proposed call wire({"to": "bob"}) within 10 minutes: the '
            "request expired. It did not run and must not be retried without a new request."
        )
        with pytest.raises(ResumeConflictError):
            await session.confirm(proposal.confirmation_id, True, by="U1")
        resolved = [e for e in await store.read_events("s1") if isinstance(e, ConfirmationResolved)]
        assert [(e.outcome, e.accepted, e.by) for e in resolved] == [("expired", False, None)]
    finally:
        await rt.close()


async def test_past_its_deadline_a_request_takes_no_answer_even_before_the_sweep(
    store: SessionStore,
) -> None:
    clock, agent = Clock(), _refund_agent(approval_expires_after=60)
    rt = _runtime(store, agent, refund_model(), clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        clock.now = START + 61
        with pytest.raises(ResumeConflictError, match="expired"):
            await session.resume("T1", "approve-refund", True, by="U1")
        assert await session.pending() != [], "the refusal changed nothing"
        assert await rt.expire_due() == 1
    finally:
        await rt.close()


async def test_the_recovery_sweep_expires_requests_by_itself(store: SessionStore) -> None:
    clock, agent = Clock(), _refund_agent(approval_expires_after=60)
    runtime = Runtime(
        store, refund_model(), agent=agent, clock=clock, recovery_interval=0.02, poll_interval=0.02
    )
    async with runtime as rt:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        expired = asyncio.Event()
        await session.observe(lambda e: expired.set() if e.type == "input.resolved" else None)
        clock.now = START + 60
        async with asyncio.timeout(10):
            await expired.wait()
        assert (await session.result("T1")).status == TurnStatus.COMPLETED


async def test_answering_or_stopping_a_park_leaves_nothing_to_expire(store: SessionStore) -> None:
    clock, agent = Clock(), _refund_agent(approval_expires_after=60)
    rt = _runtime(store, agent, refund_model(), clock)
    try:
        answered = rt.session(agent, "s1")
        await answered.result(await answered.start(slack_event("refund"), turn_id="T1"))
        await answered.resume("T1", "approve-refund", True, by="U1")
        stopped = rt.session(agent, "s2")
        await stopped.result(await stopped.start(slack_event("refund"), turn_id="T2"))
        await stopped.stop(by="U1")
        assert (await answered.result("T1")).status == TurnStatus.COMPLETED
        assert (await stopped.result("T2")).status == TurnStatus.CANCELLED
        clock.now = START + 3600
        assert await rt.expire_due() == 0
        assert await store.due_timers(clock.now) == []
    finally:
        await rt.close()


async def test_no_limit_waits_forever_and_inf_overrides_the_agents_default(
    store: SessionStore,
) -> None:
    @tool(expires_after=math.inf)
    async def patient(ctx: ToolContext) -> str:
        """Waits as long as it takes."""
        return str(await ctx.request_input(id="p", prompt="Whenever?"))

    clock = Clock()
    agent = Agent(name="a", instructions="x", tools=[patient], approval_expires_after=60)
    model = ScriptedModel([ScriptedReply(tool_calls=[ToolCall(id="p", name="patient", input={})])])
    rt = _runtime(store, agent, model, clock)
    try:
        session = rt.session(agent, "s1")
        parked = await session.result(await session.start(slack_event("p"), turn_id="T1"))
        assert parked.request is not None
        assert parked.request.expires_at is None
        clock.now = START + 1e9
        assert await rt.expire_due() == 0
        assert await session.pending() != []
    finally:
        await rt.close()


@pytest.mark.parametrize("bad", [0, -5, float("nan"), "60", True])
def test_a_limit_that_is_not_a_positive_number_is_refused_where_it_is_declared(bad: Any) -> None:
    with pytest.raises(AssemblyError, match="expires_after"):
        Agent(name="a", instructions="x", approval_expires_after=bad)

    with pytest.raises(AssemblyError, match="expires_after"):

        @tool(expires_after=bad)
        async def asks() -> str:
            """Never declared."""
            return ""


async def test_a_bad_limit_in_the_call_is_an_error_the_model_reads(store: SessionStore) -> None:
    @tool
    async def ask(ctx: ToolContext) -> str:
        """Asks with a nonsense limit."""
        return str(await ctx.request_input(id="x", prompt="?", expires_after=-1))

    agent = Agent(name="a", instructions="x", tools=[ask])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="x", name="ask", input={})]),
            ScriptedReply(text="k"),
        ]
    )
    rt = _runtime(store, agent, model, Clock())
    try:
        result = await rt.session(agent, "s1").turn(slack_event("x"))
    finally:
        await rt.close()
    assert result.status == TurnStatus.COMPLETED
    [error] = _tool_results(model, 1)
    assert error.result == {
        "error": "ToolError: request_input: expires_after must be positive, got -1"
    }


async def test_a_timer_survives_a_restart_and_two_sweepers_apply_it_once(sql_url: str) -> None:
    clock, agent = Clock(), _refund_agent(approval_expires_after=60)
    first = await SqlStore.open(sql_url)
    rt = _runtime(first, agent, refund_model(), clock)
    session = rt.session(agent, "s1")
    await session.result(await session.start(slack_event("refund"), turn_id="T1"))
    await rt.close()
    await first.close()  # the process that parked the turn is gone: nothing of it is in memory

    clock.now = START + 60
    stores = [await SqlStore.open(sql_url) for _ in range(2)]
    runtimes = [_runtime(s, agent, refund_model(), clock) for s in stores]
    try:
        applied = await asyncio.gather(*(r.expire_due() for r in runtimes))
        assert sorted(applied) == [0, 1]
        result = await runtimes[0].session(agent, "s1").result("T1")
        assert result.status == TurnStatus.COMPLETED
        events = [e.type for e in await stores[0].read_events("s1")]
        assert events.count("input.resolved") == 1
    finally:
        for r in runtimes:
            await r.close()
        for s in stores:
            await s.close()
