"""What a host reads and answers through the session alone (issue 13, item 8), on every store.

Written as a host's own test harness would be: everything comes from `agent`, and every read goes
through `AgentSession` (turns, a turn's memoized steps, the session's confirmations and receipts),
never through the store the test happens to hold.
"""

from __future__ import annotations

import pytest

from agent import (
    Agent,
    AgentSession,
    AnswerRequest,
    ConfirmationStatus,
    EffectAuthority,
    InboundEvent,
    JsonData,
    Principal,
    ReceiptStatus,
    ResumeAuthorizationError,
    ResumeRequest,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    Speaker,
    StepConflictError,
    Tool,
    ToolContext,
    Trigger,
    TurnInput,
    TurnNotFoundError,
    TurnStatus,
    UserAnswerer,
    grant_answer,
    grant_confirmation,
    tool,
)
from agent.seams import TurnKind


@tool
async def lookup(q: str) -> str:
    """Look a thing up."""
    return q.upper()


@tool(effect="write", confirmation="required")
async def close_ticket(ticket: str, ctx: ToolContext) -> dict[str, JsonData]:
    """Close a ticket (a person confirms first)."""
    return {"closed": ticket}


GATEWAY: list[str] = []


@tool(effect="write", confirmation="required")
async def charge(order: str, ctx: ToolContext) -> dict[str, JsonData]:
    """Charge an order; the gateway times out, so nobody knows whether it charged."""

    def attempt(authority: EffectAuthority) -> JsonData:
        GATEWAY.append(authority.idempotency_key)
        raise TimeoutError("gateway timed out")

    effect = await ctx.run_effect(f"charge:{order}", attempt, payload={"order": order})
    return {"charged": effect.value}


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel) -> Runtime:
    return Runtime(store, model, agent=agent, recovery_interval=0.05, poll_interval=0.02)


def _calling(call_id: str, tool_name: str, **arguments: JsonData) -> list[ScriptedReply]:
    """One turn's script: call the tool, then say it is done."""
    return [
        ScriptedReply(tool_calls=[(call_id, tool_name, arguments)]),
        ScriptedReply(text="Done."),
    ]


def _confirming_model() -> ScriptedModel:
    """A turn opening with "close T-1" proposes closing it; the turn acting on the answer
    reports. That turn's first step is the engine's (the confirmed call, as an assistant
    message), so the model's reply there is the second of the turn."""
    return ScriptedModel(
        by_opening={"close T-1": _calling("w1", "close_ticket", ticket="T-1")},
        replies=[ScriptedReply(text="(never asked)"), ScriptedReply(text="Closed as confirmed.")],
    )


# turns and steps --------------------------------------------------------------------------------


async def test_a_host_reads_the_turns_and_each_turns_memoized_steps(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[lookup])
    model = ScriptedModel(turns=[_calling("c1", "lookup", q="fan-7"), [ScriptedReply(text="Bye.")]])
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.turn("look up FAN-7", turn_id="t1")
        await session.turn("thanks", turn_id="t2")
        turns = await session.turns()
        assert [(t.turn_id, t.status, t.kind) for t in turns] == [
            ("t1", TurnStatus.COMPLETED, TurnKind.TURN),
            ("t2", TurnStatus.COMPLETED, TurnKind.TURN),
        ]
        assert turns[0].input.text == "look up FAN-7"
        # transcript: 0 user, 1 assistant (the call), 2 tool result, 3 assistant, 4 user, 5 ...
        first = await session.steps("t1")
        assert list(first) == ["model:1", "tool:1:c1", "model:3"]
        assert first["tool:1:c1"] == "FAN-7"
        assert list(await session.steps("t2")) == ["model:5"]
        with pytest.raises(TurnNotFoundError):
            await session.steps("never-started")
        assert await rt.session(agent, "s2").turns() == []

        await session.reset()
        assert await session.turns() == []
        assert await session.steps("t1") == {}, "a reset archives the steps"


async def test_an_answer_to_a_park_is_one_of_the_turns_steps(store: SessionStore) -> None:
    @tool
    async def ask(ctx: ToolContext) -> dict[str, JsonData]:
        """Ask a person."""
        answer = await ctx.request_input(id="ok", prompt="OK?", schema={"type": "boolean"})
        return {"answer": answer}

    agent = Agent(name="a", instructions="x", tools=[ask])
    async with _runtime(store, agent, ScriptedModel(_calling("c1", "ask"))) as rt:
        session = rt.session(agent, "s1")
        parked = await session.result(await session.start("go", turn_id="t1"))
        assert parked.status == TurnStatus.SUSPENDED
        assert list(await session.steps("t1")) == ["model:1", "park:t1:ok"]
        await session.resume("t1", "ok", True)
        assert (await session.result("t1")).status == TurnStatus.COMPLETED
        steps = await session.steps("t1")
        assert steps["input:t1:ok"] is True
        assert steps["tool:1:c1"] == {"answer": True}


# confirmations ----------------------------------------------------------------------------------


async def test_a_host_finds_the_pending_confirmations_and_answers_one(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[close_ticket])
    model = _confirming_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        assert await session.confirmations() == []
        await session.turn("close T-1", turn_id="t1")
        [pending] = await session.confirmations(ConfirmationStatus.PENDING)
        assert (pending.tool, pending.arguments, pending.turn_id) == (
            "close_ticket",
            {"ticket": "T-1"},
            "t1",
        )
        assert await rt.session(agent, "s2").confirmations() == [], "per session"

        follow_up = await session.confirm(pending.confirmation_id, True, by="U1")
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        assert await session.confirmations(ConfirmationStatus.PENDING) == []
        [answered] = await session.confirmations()
        assert (answered.status, answered.by, answered.follow_up_turn) == (
            ConfirmationStatus.ACCEPTED,
            "U1",
            follow_up,
        )
        assert [t.turn_id for t in await session.turns()] == ["t1", follow_up]


# receipts ---------------------------------------------------------------------------------------


async def _uncertain_charge(rt: Runtime, agent: Agent, key: str) -> AgentSession:
    session = rt.session(agent, key)
    await session.turn("charge o1")
    [proposed] = await session.confirmations(ConfirmationStatus.PENDING)
    await session.result(await session.confirm(proposed.confirmation_id, True))
    return session


async def test_a_host_lists_the_sessions_receipts_and_resolves_one(store: SessionStore) -> None:
    GATEWAY.clear()
    agent = Agent(name="a", instructions="x", tools=[charge])
    model = ScriptedModel(_calling("p1", "charge", order="o1"))
    async with _runtime(store, agent, model) as rt:
        session = await _uncertain_charge(rt, agent, "s1")
        other = await _uncertain_charge(rt, agent, "s2")
        [receipt] = await session.receipts()
        assert (receipt.key, receipt.status, receipt.session) == (
            "charge:charge:o1",
            ReceiptStatus.UNCERTAIN,
            "s1",
        )
        assert await session.receipts(ReceiptStatus.UNCERTAIN) == [receipt]
        assert await session.receipts(ReceiptStatus.COMPLETED) == []

        with pytest.raises(ValueError, match="completed or failed"):
            await session.resolve_receipt(receipt.key, status="uncertain")
        settled = await session.resolve_receipt(
            receipt.key, status="completed", value={"charge": "ch_1"}
        )
        assert (settled.status, settled.value) == (ReceiptStatus.COMPLETED, {"charge": "ch_1"})
        assert await session.receipts(ReceiptStatus.COMPLETED) == [settled]
        with pytest.raises(StepConflictError):  # only an uncertain receipt is resolved
            await session.resolve_receipt(receipt.key, status="failed")

        [untouched] = await other.receipts()
        assert untouched.status == ReceiptStatus.UNCERTAIN, "another session's receipt"
        failed = await other.resolve_receipt(untouched.key, status=ReceiptStatus.FAILED)
        assert failed.status == ReceiptStatus.FAILED
    assert len(GATEWAY) == 2


# who answers: `by` and `principal` ------------------------------------------------------------


def _refund_tool(answerers: dict[str, JsonData] | None = None) -> Tool:
    @tool
    async def refund(order: str, ctx: ToolContext) -> dict[str, JsonData]:
        """Refund an order once a person approves."""
        approved = await ctx.request_input(
            id="approve",
            prompt=f"Refund order {order}?",
            schema={"type": "boolean"},
            answerers=answerers,
        )
        return {"refunded": approved is True}

    return refund


SPOKEN_IN_T1 = InboundEvent(
    source="slack",
    text="refund order 42",
    user=Speaker(id="U1", attested=True),
    context={"team": "T1", "channel": "C1"},
)


async def _parked(
    rt: Runtime, agent: Agent, opening: str | InboundEvent | TurnInput = "refund order 42"
) -> AgentSession:
    session = rt.session(agent, "s1")
    parked = await session.result(await session.start(opening, turn_id="t1"))
    assert parked.status == TurnStatus.SUSPENDED
    return session


async def _still_parked(session: AgentSession) -> None:
    """A refused answer changed nothing: the same request waits, no answer was stored."""
    [pending] = await session.pending()
    assert pending.id == "approve"
    assert "input:t1:approve" not in await session.steps("t1")


async def _completes(session: AgentSession) -> None:
    assert (await session.result("t1")).status == TurnStatus.COMPLETED


@pytest.mark.parametrize(
    ("opening", "principal"),
    [
        (SPOKEN_IN_T1, {"team": "T1", "user": "U2"}),
        ("refund order 42", {"user": "U2"}),
    ],
    ids=["in-a-workspace", "no-workspace"],
)
async def test_a_principal_naming_someone_else_than_by_is_refused(
    store: SessionStore, opening: str | InboundEvent, principal: Principal
) -> None:
    agent = Agent(name="a", instructions="x", tools=[_refund_tool()])
    async with _runtime(store, agent, ScriptedModel(_calling("r1", "refund", order="42"))) as rt:
        session = await _parked(rt, agent, opening)
        with pytest.raises(ResumeAuthorizationError, match="different people"):
            await session.resume("t1", "approve", True, by="U1", principal=principal)
        await _still_parked(session)
        await session.resume("t1", "approve", True, by="U1", principal={**principal, "user": "U1"})
        await _completes(session)


async def test_a_principal_without_by_names_the_answerer(store: SessionStore) -> None:
    """`by` and the principal's user are one verified fact: either one alone is enough."""
    agent = Agent(name="a", instructions="x", tools=[_refund_tool({"user": "U9"})])
    async with _runtime(store, agent, ScriptedModel(_calling("r1", "refund", order="42"))) as rt:
        session = await _parked(rt, agent)
        with pytest.raises(ResumeAuthorizationError, match="only the person it asks"):
            await session.resume("t1", "approve", True, principal={"user": "U8"})
        await _still_parked(session)
        await session.resume("t1", "approve", True, principal={"user": "U9"})
        await _completes(session)


async def test_without_a_workspace_on_the_request_only_the_person_is_checked(
    store: SessionStore,
) -> None:
    """A turn started by host code saved no workspace: the principal's team cannot be compared
    with anything, its user still must be the answerer."""
    agent = Agent(name="a", instructions="x", tools=[_refund_tool({"user": "U9"})])
    async with _runtime(store, agent, ScriptedModel(_calling("r1", "refund", order="42"))) as rt:
        session = await _parked(rt, agent)
        with pytest.raises(ResumeAuthorizationError):
            await session.resume(
                "t1", "approve", True, by="U9", principal={"team": "T1", "user": "U1"}
            )
        await _still_parked(session)
        await session.resume("t1", "approve", True, by="U9", principal={"team": "T7", "user": "U9"})
        await _completes(session)


async def test_a_confirmation_checks_the_principal_and_records_its_user(
    store: SessionStore,
) -> None:
    agent = Agent(name="a", instructions="x", tools=[close_ticket])
    model = _confirming_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.turn("close T-1", turn_id="t1")
        [pending] = await session.confirmations(ConfirmationStatus.PENDING)
        with pytest.raises(ResumeAuthorizationError, match="different people"):
            await session.confirm(pending.confirmation_id, True, by="U1", principal={"user": "U2"})
        assert await session.confirmations(ConfirmationStatus.PENDING) == [pending]
        follow_up = await session.confirm(pending.confirmation_id, True, principal={"user": "U5"})
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        [answered] = await session.confirmations()
        assert (answered.status, answered.by) == (ConfirmationStatus.ACCEPTED, "U5")
        [*_, acting] = await session.turns()
        assert acting.input.trigger is not None
        assert acting.input.trigger.by == "U5"
        assert acting.input.trigger.answerers == UserAnswerer(user="U5"), "U5 answers what follows"


def _policy_turn(text: str) -> TurnInput:
    return TurnInput(
        text=text,
        trigger=Trigger(
            kind="proactive",
            by="cron:daily",
            answerers={"policy": "ops", "scope": "refunds"},
            context={"team": "T1"},
        ),
    )


class Hook:
    """An `authorize_answer` that lets U7 answer and remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[AnswerRequest] = []

    async def __call__(self, request: AnswerRequest) -> bool:
        self.asked.append(request)
        return request["by"] == "U7"


async def test_a_grant_is_asked_for_the_one_person_by_and_principal_name(
    store: SessionStore,
) -> None:
    hook = Hook()
    agent = Agent(name="a", instructions="x", tools=[_refund_tool()], authorize_answer=hook)
    async with _runtime(store, agent, ScriptedModel(_calling("r1", "refund", order="42"))) as rt:
        session = await _parked(rt, agent, _policy_turn("refunds to approve"))
        two_people = ResumeRequest(
            turn_id="t1", input_id="approve", by="U7", principal={"team": "T1", "user": "U8"}
        )
        with pytest.raises(ResumeAuthorizationError, match="different people"):
            await grant_answer(session, two_people)
        assert hook.asked == [], "the hook is never asked about two people at once"

        u7: Principal = {"team": "T1", "enterprise": None, "user": "U7"}
        grant = await grant_answer(
            session, ResumeRequest(turn_id="t1", input_id="approve", principal=u7)
        )
        assert grant is not None
        assert grant.by == "U7"
        assert hook.asked == [{"policy": "ops", "scope": "refunds", "by": "U7", "principal": u7}]
        with pytest.raises(ResumeAuthorizationError):
            await session.resume(
                "t1", "approve", True, principal={"team": "T1", "user": "U8"}, granted=grant
            )
        await _still_parked(session)
        await session.resume("t1", "approve", True, principal=u7, granted=grant)
        await _completes(session)


async def test_a_confirmation_grant_is_asked_for_the_one_person_by_and_principal_name(
    store: SessionStore,
) -> None:
    hook = Hook()
    agent = Agent(name="a", instructions="x", tools=[close_ticket], authorize_answer=hook)
    model = _confirming_model()
    async with _runtime(store, agent, model) as rt:
        session = rt.session(agent, "s1")
        await session.turn(_policy_turn("close T-1"), turn_id="t1")
        [pending] = await session.confirmations(ConfirmationStatus.PENDING)
        with pytest.raises(ResumeAuthorizationError, match="different people"):
            await grant_confirmation(
                session, pending.confirmation_id, by="U7", principal={"team": "T1", "user": "U8"}
            )
        assert hook.asked == []

        u7: Principal = {"team": "T1", "user": "U7"}
        grant = await grant_confirmation(session, pending.confirmation_id, by=None, principal=u7)
        assert grant is not None
        assert grant.by == "U7"
        follow_up = await session.confirm(
            pending.confirmation_id, True, principal=u7, granted=grant
        )
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        [answered] = await session.confirmations()
        assert answered.by == "U7"
