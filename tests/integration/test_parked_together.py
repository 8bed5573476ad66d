"""Several requests in one turn: the calls of one model reply that each ask a person park
together, each request with its own answerers, digest and expiry; each is answered on its own,
in any order, and binds to its own call; the model is called again only when none still waits.
A Stop ends them all. On every store: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    Agent,
    InputResolved,
    RequestExpiredError,
    ResumeAuthorizationError,
    ResumeConflictError,
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
from agent.seams import SessionStatus

START = 1_000_000.0
ORDERS = ("41", "42", "43")
ANSWERER = {"41": "U41", "42": "U42", "43": "U43"}


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _refund_agent(runs: list[str]) -> Agent:
    @tool
    async def refund(order: str, ctx: ToolContext) -> dict[str, Any]:
        """Refunds an order once the person responsible for it approves."""
        runs.append(order)
        try:
            approved = await ctx.request_input(
                id="approve",  # the same id in every call: each call's answer is its own
                prompt=f"Refund order {order}?",
                schema={"type": "boolean"},
                answerers={"user": ANSWERER[order]},
                expires_after=60 if order == "42" else None,
            )
        except RequestExpiredError:
            return {"order": order, "refunded": False, "why": "expired"}
        return {"order": order, "refunded": approved is True}

    return Agent(name="ops", instructions="Refund orders.", tools=[refund])


def _model() -> ScriptedModel:
    calls = [ToolCall(id=f"c{o}", name="refund", input={"order": o}) for o in ORDERS]
    return ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel, **kw: Any) -> Runtime:
    """Not entered: no background sweep races the test's own answers and expiries."""
    kw.setdefault("tool_concurrency", 4)
    return Runtime(store, model, agent=agent, poll_interval=0.02, lease_ttl=1e9, **kw)


def _results(model: ScriptedModel, step: int) -> list[Any]:
    return [m.result for m in model.requests[step].messages if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("concurrency", [4, 1])
async def test_three_refunds_park_together_and_are_approved_in_reverse_by_three_people(
    store: SessionStore, concurrency: int
) -> None:
    """Run side by side or one after another, the three calls ask at once: three requests
    wait, each for its own person; answered in reverse order, the turn stays parked (the model
    is not called) until the last answer, then each call reads its own answer."""
    runs: list[str] = []
    agent, model = _refund_agent(runs), _model()
    rt = _runtime(store, agent, model, tool_concurrency=concurrency, clock=Clock())
    try:
        session = rt.session(agent, "s1")
        parked = await session.result(await session.start("refund them", turn_id="T1"))
        assert parked.status == TurnStatus.SUSPENDED
        waiting = await session.pending()
        assert [r.call_id for r in waiting] == ["c41", "c42", "c43"]
        assert [r.prompt for r in waiting] == [f"Refund order {o}?" for o in ORDERS]
        assert len({r.id for r in waiting}) == 3, "siblings asking with one id collided"
        assert len({r.digest for r in waiting}) == 3
        assert list(parked.requests) == waiting
        assert parked.request == waiting[0]
        events = await session.events()
        assert [e.request.call_id for e in events if e.type == "input.requested"] == [
            "c41",
            "c42",
            "c43",
        ]
        by_call = {r.call_id: r for r in waiting}

        # An answer binds to one request: U41 cannot answer 43's, nor 42's.
        with pytest.raises(ResumeAuthorizationError):
            await session.resume("T1", by_call["c43"].id, True, by="U41")

        await session.resume("T1", by_call["c43"].id, True, by="U43")
        await session.resume("T1", by_call["c42"].id, False, by="U42")
        record = await store.get_session("s1")
        assert record is not None
        assert record.status == SessionStatus.SUSPENDED
        assert [r.call_id for r in await session.pending()] == ["c41"]
        assert len(model.requests) == 1, "the model was called while a request still waited"
        with pytest.raises(ResumeConflictError, match="already answered"):
            await session.resume("T1", by_call["c43"].id, False, by="U43")

        await session.resume("T1", by_call["c41"].id, True, by="U41")
        done = await session.result("T1")
    finally:
        await rt.close()

    assert done.status == TurnStatus.COMPLETED, done
    assert await session.pending() == []
    assert _results(model, 1) == [
        {"order": "41", "refunded": True},
        {"order": "42", "refunded": False},
        {"order": "43", "refunded": True},
    ]
    resolved = [e for e in await session.events() if isinstance(e, InputResolved)]
    assert [(e.input_id, e.by) for e in resolved] == [
        (by_call["c43"].id, "U43"),
        (by_call["c42"].id, "U42"),
        (by_call["c41"].id, "U41"),
    ]
    assert sorted(runs) == ["41", "41", "42", "42", "43", "43"], "a call ran more than twice"


async def test_one_denied_one_expired_one_approved(store: SessionStore) -> None:
    """Each request ends its own way: 42's timer expires it alone, 43 is denied with a
    reason, 41 approved; the model reads each outcome on its own call."""
    clock = Clock()
    runs: list[str] = []
    agent, model = _refund_agent(runs), _model()
    rt = _runtime(store, agent, model, clock=clock)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start("refund them", turn_id="T1"))
        by_call = {r.call_id: r for r in await session.pending()}
        assert by_call["c42"].expires_at == START + 60
        assert by_call["c41"].expires_at is None

        clock.now = START + 61
        assert await rt.expire_due() == 1
        assert [r.call_id for r in await session.pending()] == ["c41", "c43"]
        assert await rt.expire_due() == 0, "an expiry applied twice"
        with pytest.raises(ResumeConflictError, match="expired"):
            await session.resume("T1", by_call["c42"].id, True, by="U42")

        await session.resume("T1", by_call["c43"].id, False, by="U43", reason="wrong order")
        assert len(model.requests) == 1
        await session.resume("T1", by_call["c41"].id, True, by="U41")
        done = await session.result("T1")
    finally:
        await rt.close()

    assert done.status == TurnStatus.COMPLETED, done
    results = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [m.result for m in results] == [
        {"order": "41", "refunded": True},
        {"order": "42", "refunded": False, "why": "expired"},
        {"order": "43", "refunded": False},
    ]
    assert "wrong order" in (results[2].note or "")
    outcomes = [
        (e.input_id, e.outcome) for e in await session.events() if e.type == "input.resolved"
    ]
    assert outcomes == [
        (by_call["c42"].id, "expired"),
        (by_call["c43"].id, "answered"),
        (by_call["c41"].id, "answered"),
    ]


async def test_racing_answers_one_request_one_wins_and_siblings_answer_side_by_side(
    store: SessionStore,
) -> None:
    """Two answers to one request at once: exactly one applies, the other is refused as
    answered already. Answers to two different requests at once both apply (a sibling's
    answer changing the park is no reason to refuse)."""
    runs: list[str] = []
    agent, model = _refund_agent(runs), _model()
    rt = _runtime(store, agent, model, clock=Clock())
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start("refund them", turn_id="T1"))
        by_call = {r.call_id: r for r in await session.pending()}

        same = await asyncio.gather(
            session.resume("T1", by_call["c41"].id, True, by="U41"),
            session.resume("T1", by_call["c41"].id, False, by="U41"),
            return_exceptions=True,
        )
        refused = [o for o in same if isinstance(o, BaseException)]
        assert [type(o) for o in refused] == [ResumeConflictError], same

        apart = await asyncio.gather(
            session.resume("T1", by_call["c42"].id, True, by="U42"),
            session.resume("T1", by_call["c43"].id, True, by="U43"),
            return_exceptions=True,
        )
        assert apart == [None, None], apart
        done = await session.result("T1")
    finally:
        await rt.close()
    assert done.status == TurnStatus.COMPLETED
    answered = [e for e in await session.events() if e.type == "input.resolved"]
    assert len(answered) == 3


async def test_stop_ends_every_waiting_request_and_the_model_is_not_called(
    store: SessionStore,
) -> None:
    runs: list[str] = []
    agent, model = _refund_agent(runs), _model()
    rt = _runtime(store, agent, model, clock=Clock())
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start("refund them", turn_id="T1"))
        await session.resume("T1", (await session.pending())[0].id, True, by="U41")
        assert await session.stop(by="U1", reason="stop button") == ["T1"]
        done = await session.result("T1")
        transcript = await session.transcript()
    finally:
        await rt.close()

    assert (done.status, done.reason) == (TurnStatus.CANCELLED, "stop button")
    assert await session.pending() == []
    assert len(model.requests) == 1, "the model was called for a stopped turn"
    assert [m.result for m in transcript if isinstance(m, ToolMessage)] == [{"cancelled": True}] * 3
    ended = [e for e in await session.events() if isinstance(e, InputResolved)]
    assert [e.outcome for e in ended] == ["answered", "cancelled", "cancelled"]
    assert runs == ["41", "42", "43"], "a stopped call ran again"


async def test_a_stop_while_two_calls_run_and_one_has_asked_announces_no_request(
    store: SessionStore,
) -> None:
    """The asking call has asked, but the turn parks only once its siblings end: a Stop before
    then ends the turn as cancelled; the request was never posted, so nobody is left a button
    that leads nowhere."""
    entered: list[str] = []
    both = asyncio.Event()

    @tool
    async def watch(name: str, ctx: ToolContext) -> str:
        """Runs until the turn is stopped."""
        entered.append(name)
        if len(entered) == 2:
            both.set()
        async with asyncio.timeout(30):
            await ctx.cancellation.wait()
        return f"{name} stopped early"

    @tool
    async def ask(ctx: ToolContext) -> Any:
        """Asks a person."""
        return await ctx.request_input(id="ok", prompt="OK?", answerers={"user": "U1"})

    agent = Agent(name="a", instructions="x", tools=[watch, ask])
    calls = [
        ToolCall(id="w1", name="watch", input={"name": "one"}),
        ToolCall(id="q", name="ask", input={}),
        ToolCall(id="w2", name="watch", input={"name": "two"}),
    ]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="done")])
    async with Runtime(
        store, model, agent=agent, tool_concurrency=4, recovery_interval=0.05, poll_interval=0.02
    ) as rt:
        session = rt.session(agent, "s1")
        await session.start("go", turn_id="t1")
        async with asyncio.timeout(30):
            await both.wait()
        assert await session.stop(by="U1", reason="stop button") == ["t1"]
        done = await session.result("t1")
        transcript = await session.transcript()
        events = await session.events()

    assert done.status == TurnStatus.CANCELLED
    assert [m.result for m in transcript if isinstance(m, ToolMessage)] == [
        "one stopped early",
        {"cancelled": True},
        "two stopped early",
    ]
    assert not [e for e in events if e.type == "input.requested"]
    assert await session.pending() == []
