"""Who may act on a session, in the engine (every store): an answer to a proposed write is
bound to its turn and digest as a park's is, a second answer hears "already answered", and a
Stop or cancel by a person stops only what is theirs to stop (a parked turn: whoever may answer
it, and the person who asked; a running one: the person who asked, or whom the agent's policy
allows). Host code naming nobody stays unrestricted (the other stop tests)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    STOP_POLICY,
    Agent,
    AnswerRequest,
    ConfirmationRequested,
    ConfirmationStatus,
    Principal,
    ResumeConflictError,
    ResumeRequest,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    StopAuthorizationError,
    ToolCall,
    TurnStatus,
    confirmation_digest,
    grant_answer,
    grant_confirmation,
    tool,
)
from tests.integration.test_confirmations import REFUNDS, _agent, _model
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel) -> Runtime:
    return Runtime(store, model, agent=agent, recovery_interval=0.05, poll_interval=0.02)


def person(user: str, team: str = "T1") -> Principal:
    return {"team": team, "enterprise": None, "user": user}


# -- a proposed write's answer is bound to what was shown -------------------------------------


async def test_an_answer_to_a_proposed_write_must_name_its_turn_and_digest(
    store: SessionStore,
) -> None:
    REFUNDS.clear()
    agent = _agent()
    async with _runtime(store, agent, _model()) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("refund order 42", user="U1"), turn_id="t1")
        [pending] = await store.list_confirmations("s1")
        [announced] = [
            e for e in await store.read_events("s1") if e.type == "confirmation.requested"
        ]
        assert isinstance(announced, ConfirmationRequested)
        digest = confirmation_digest(pending)
        assert confirmation_digest(announced.confirmation) == digest, (
            "the event's digest is the row's"
        )
        ident = pending.confirmation_id

        for wrong in ({"turn_id": "t0"}, {"digest": "0" * 64}, {"turn_id": "t0", "digest": digest}):
            with pytest.raises(ResumeConflictError):
                await session.confirm(ident, True, principal=person("U1"), **wrong)
            with pytest.raises(ResumeConflictError):
                await grant_confirmation(session, ident, by="U1", **wrong)
        [still] = await store.list_confirmations("s1")
        assert still.status == ConfirmationStatus.PENDING
        assert REFUNDS == []

        follow_up = await session.confirm(
            ident, True, principal=person("U1"), turn_id="t1", digest=digest
        )
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        assert len(REFUNDS) == 1


async def test_a_second_answer_hears_already_answered(store: SessionStore) -> None:
    REFUNDS.clear()
    agent = _agent()
    async with _runtime(store, agent, _model()) as rt:
        session = rt.session(agent, "s1")
        await session.turn(slack_event("refund order 42", user="U1"))
        [pending] = await store.list_confirmations("s1")
        await session.confirm(pending.confirmation_id, False, by="U1")
        with pytest.raises(ResumeConflictError, match="already answered"):
            await session.confirm(pending.confirmation_id, True, by="U1")
        with pytest.raises(ResumeConflictError, match="already answered"):
            await grant_confirmation(session, pending.confirmation_id, by="U1")

    agent, model = refund_agent(), refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s2")
        tid = await session.start(slack_event("refund order 42"), turn_id="T1")
        request = (await session.result(tid)).request
        assert request is not None
        await session.resume(tid, request.id, True, by="U1", digest=request.digest)
        for _ in range(2):  # while the turn runs on, and once it has ended
            with pytest.raises(ResumeConflictError, match="already answered") as again:
                await session.resume(tid, request.id, True, by="U1", digest=request.digest)
            assert "s2" not in str(again.value), "no internal key in what a person reads"
            with pytest.raises(ResumeConflictError, match="already answered"):
                await grant_answer(session, ResumeRequest(turn_id=tid, input_id=request.id))
            await session.result(tid)


async def test_racing_answers_all_but_one_hear_already_answered(store: SessionStore) -> None:
    agent, model = refund_agent(), refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(slack_event("refund order 42"), turn_id="T1")
        request = (await session.result(tid)).request
        assert request is not None
        answers = await asyncio.gather(
            *(
                session.resume(tid, request.id, True, by="U1", digest=request.digest)
                for _ in range(6)
            ),
            return_exceptions=True,
        )
        refused = [a for a in answers if a is not None]
        assert len(refused) == 5
        assert all(isinstance(a, ResumeConflictError) for a in refused)
        assert {str(a) for a in refused} == {"this request was already answered"}


# -- Stop on a parked turn: whoever may answer it, and the person who asked ----------------


async def test_only_who_may_answer_a_park_or_its_asker_may_stop_it(store: SessionStore) -> None:
    agent, model = refund_agent({"user": "U5"}), refund_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(slack_event("refund order 42", user="U1"), turn_id="T1")
        assert (await session.result(tid)).status == TurnStatus.SUSPENDED

        for stranger in (person("U2"), person("U5", team="T9"), person("U1", team="T9")):
            with pytest.raises(StopAuthorizationError) as refused:
                await session.stop(principal=stranger)
            assert refused.value.http_status == 403
            with pytest.raises(StopAuthorizationError):
                await session.stop(by=stranger["user"], principal=stranger)
        assert await session.pending() != [], "a refused stop changed nothing"
        assert (await store.get_turn("s1", "T1")).status == TurnStatus.SUSPENDED  # type: ignore[union-attr]

        assert await session.stop(principal=person("U5")) == ["T1"], "the answerer may"
        result = await session.result(tid)
        assert result.status == TurnStatus.CANCELLED
        cancelled = [e for e in await store.read_events("s1") if e.type == "turn.cancelled"]
        assert [e.by for e in cancelled] == ["U5"]

        tid = await session.start(slack_event("refund order 43", user="U1"), turn_id="T2")
        assert (await session.result(tid)).status == TurnStatus.SUSPENDED
        assert await session.stop(principal=person("U1")) == ["T2"], "the asker may too"


async def test_a_park_for_a_policy_is_stopped_by_whom_its_hook_admits(store: SessionStore) -> None:
    async def managers(request: AnswerRequest) -> bool:
        return request["policy"] == "managers" and request["by"] == "U7"

    agent = refund_agent({"policy": "managers"}, authorize_answer=managers)
    async with _runtime(store, agent, refund_model()) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(slack_event("refund order 42", user="U1"), turn_id="T1")
        assert (await session.result(tid)).status == TurnStatus.SUSPENDED
        with pytest.raises(StopAuthorizationError):
            await session.stop(principal=person("U8"))
        assert await session.stop(principal=person("U7")) == ["T1"]


# -- Stop on a running turn: the person who asked, or whom the policy allows ----------------


async def test_a_running_turn_is_stopped_by_its_asker_or_the_stop_policy(
    store: SessionStore,
) -> None:
    entered: dict[str, asyncio.Event] = {}
    release = asyncio.Event()

    @tool
    async def slow(name: str) -> str:
        """Runs until released."""
        entered.setdefault(name, asyncio.Event()).set()
        await release.wait()
        return "done"

    asked: list[AnswerRequest] = []

    async def moderators(request: AnswerRequest) -> bool:
        asked.append(request)
        return request["policy"] == STOP_POLICY and request["by"] == "U9"

    agent = Agent(name="a", instructions="x", tools=[slow], authorize_answer=moderators)

    def respond(request: Any, step: int) -> ScriptedReply:
        opening = next(m for m in reversed(request.messages) if m.role == "user")
        if step == 0:
            return ScriptedReply(
                tool_calls=[ToolCall(id="c", name="slow", input={"name": opening.text})]
            )
        return ScriptedReply(text="finished")

    async with _runtime(store, agent, ScriptedModel(responder=respond)) as rt:
        one = rt.session(agent, "s1")
        await one.start(slack_event("one", user="U1"), turn_id="t1")
        await asyncio.wait_for(entered.setdefault("one", asyncio.Event()).wait(), 15)

        with pytest.raises(StopAuthorizationError):
            await one.stop(principal=person("U2"))
        with pytest.raises(StopAuthorizationError):
            await one.cancel("t1", principal=person("U2"))
        with pytest.raises(StopAuthorizationError):
            await one.cancel("t1", principal=person("U1", team="T9"))
        assert (await store.get_turn("s1", "t1")).cancel_reason is None  # type: ignore[union-attr]
        assert [(a["policy"], a["scope"]) for a in asked] == [(STOP_POLICY, "s1")] * 2

        assert await one.cancel("t1", principal=person("U1")) is True, "the asker may"

        two = rt.session(agent, "s2")
        await two.start(slack_event("two", user="U1"), turn_id="t2")
        await asyncio.wait_for(entered.setdefault("two", asyncio.Event()).wait(), 15)
        assert await two.stop(principal=person("U9")) == ["t2"], "the policy admits U9"
        release.set()
        assert (await one.result("t1")).status == TurnStatus.CANCELLED
        assert (await two.result("t2")).status == TurnStatus.CANCELLED


async def test_a_stop_ends_the_askers_turns_and_leaves_another_persons(
    store: SessionStore,
) -> None:
    """Bob's message queued behind alice's running turn is not alice's to stop: it still gets
    its answer; bob, for his part, may stop his own."""
    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Runs until released."""
        entered.set()
        await release.wait()
        return "done"

    agent = Agent(name="a", instructions="x", tools=[slow])
    model = ScriptedModel(
        by_opening={
            "alice's": [ScriptedReply(tool_calls=[ToolCall(id="c", name="slow", input={})])],
            "bob's": [ScriptedReply(text="answered")],
            "carol's": [ScriptedReply(text="answered")],
        }
    )
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.start(slack_event("alice's", user="U1"), turn_id="t1")
        await asyncio.wait_for(entered.wait(), 15)
        await session.start(slack_event("bob's", user="U2"), turn_id="t2")
        await session.start(slack_event("carol's", user="U3"), turn_id="t3")

        with pytest.raises(StopAuthorizationError):
            await session.stop(principal=person("U4"))
        assert await session.stop(principal=person("U1")) == ["t1"]
        assert await session.stop(principal=person("U3")) == ["t3"]
        release.set()
        assert (await session.result("t1")).status == TurnStatus.CANCELLED
        bob = await session.result("t2")
        assert (bob.status, bob.text) == (TurnStatus.COMPLETED, "answered")
        assert (await session.result("t3")).status == TurnStatus.CANCELLED
