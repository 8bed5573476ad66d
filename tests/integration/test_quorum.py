"""N of M approvals (`Quorum`), for a parked request and a proposed write alike: each vote is
stored with who and when, one person counts once, the request resolves when N approve (or at
the first Deny, or a majority's with `deny="majority"`), the model reads who approved, and of
racing deciding votes exactly one resolves it. Forged, replayed and foreign votes change
nothing. On every store: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import (
    Agent,
    ApprovalVoted,
    ConfirmationResolved,
    ConfirmationStatus,
    InputResolved,
    Quorum,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeRequest,
    ResumeValidationError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    grant_answer,
    tool,
)
from agent.seams import SessionStatus, TimerKind, VoteRecord
from tests.support.hitl_fixtures import slack_event

TEAM = {"team": "T1"}
RAN: list[str] = []


def _refund_tool(answerers: Any, schema: dict[str, Any] | None = None) -> Any:
    @tool
    async def refund(order: str, ctx: ToolContext) -> dict[str, Any]:
        """Refunds an order once enough people approve."""
        RAN.append(order)
        approved = await ctx.request_input(
            id="approve", prompt=f"Refund order {order}?", schema=schema, answerers=answerers
        )
        return {"order": order, "refunded": approved is True}

    return refund


def _model() -> ScriptedModel:
    call = ToolCall(id="c1", name="refund", input={"order": "42"})
    return ScriptedModel([ScriptedReply(tool_calls=[call]), ScriptedReply(text="done")])


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel) -> Runtime:
    """Not entered: the test's own answers are the only writers."""
    return Runtime(store, model, agent=agent, poll_interval=0.02, lease_ttl=1e9)


async def _parked(store: SessionStore, answerers: Any, **kw: Any) -> tuple[Runtime, Any, Any]:
    RAN.clear()
    agent = Agent(name="ops", instructions="x", tools=[_refund_tool(answerers)], **kw)
    model = _model()
    rt = _runtime(store, agent, model)
    session = rt.session(agent, "s1")
    parked = await session.result(
        await session.start(slack_event("refund 42", user="U0"), turn_id="T1")
    )
    assert parked.status == TurnStatus.SUSPENDED, parked
    return rt, session, model


def _as(user: str) -> dict[str, Any]:
    return {**TEAM, "user": user}


async def test_two_of_three_approve_and_the_model_reads_who(store: SessionStore) -> None:
    rt, session, model = await _parked(store, Quorum(2, users=["UA", "UB", "UC"]))
    try:
        first = await session.resume("T1", "approve", True, principal=_as("UA"))
        assert first is not None
        assert not first.decided
        assert (first.approved_by, first.need, first.counted) == (("UA",), 2, True)
        record = await store.get_session("s1")
        assert record is not None
        assert record.status == SessionStatus.SUSPENDED
        assert len(model.requests) == 1, "the model was called on one vote of two"

        # One person counts once: the same voter again (even the other way) changes nothing.
        again = await session.resume("T1", "approve", False, principal=_as("UA"))
        assert again is not None
        assert not again.counted
        assert again.approved_by == ("UA",)
        with pytest.raises(ResumeAuthorizationError, match="only the people it asks"):
            await session.resume("T1", "approve", True, principal=_as("UD"))
        with pytest.raises(ResumeValidationError, match=r"true \(approve\) or false"):
            await session.resume("T1", "approve", "yes", principal=_as("UB"))

        second = await session.resume("T1", "approve", True, principal=_as("UB"), reason="ok")
        assert second is not None
        assert second.outcome == "approved"
        done = await session.result("T1")
        assert done.status == TurnStatus.COMPLETED, done
        with pytest.raises(ResumeConflictError, match="already answered"):
            await session.resume("T1", "approve", True, principal=_as("UC"))
    finally:
        await rt.close()

    [result] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert result.result == {"order": "42", "refunded": True}
    assert result.note is not None
    assert "approved by UA, UB" in result.note, result.note
    events = await session.events()
    voted = [e for e in events if isinstance(e, ApprovalVoted)]
    assert [(e.by, e.approve) for e in voted] == [("UA", True), ("UB", True)]
    [resolved] = [e for e in events if isinstance(e, InputResolved)]
    assert (resolved.by, resolved.approved_by) == ("UB", ["UA", "UB"])
    votes = await store.list_votes("s1", TimerKind.INPUT, "T1", "approve")
    assert [(v.voter, v.approve, v.reason) for v in votes] == [
        ("UA", True, None),
        ("UB", True, "ok"),
    ]
    assert all(v.at > 0 for v in votes)
    assert RAN == ["42", "42"]


async def test_the_first_deny_declines_and_its_reason_reaches_the_model(
    store: SessionStore,
) -> None:
    rt, session, model = await _parked(store, Quorum(2, users=["UA", "UB", "UC"]))
    try:
        await session.resume("T1", "approve", True, principal=_as("UA"))
        denied = await session.resume(
            "T1", "approve", False, principal=_as("UC"), reason="over budget"
        )
        assert denied is not None
        assert denied.outcome == "denied"
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()
    [result] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert result.result == {"order": "42", "refunded": False}
    assert result.note is not None
    assert "denied by UC" in result.note, result.note
    assert "over budget" in result.note, result.note


async def test_with_deny_majority_one_deny_is_not_enough(store: SessionStore) -> None:
    quorum = Quorum(2, users=["UA", "UB", "UC"], deny="majority")
    rt, session, _ = await _parked(store, quorum)
    try:
        one = await session.resume("T1", "approve", False, principal=_as("UC"))
        assert one is not None
        assert one.outcome is None
        two = await session.resume("T1", "approve", False, principal=_as("UB"))
        assert two is not None
        assert two.outcome == "denied"
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()


async def test_racing_deciding_votes_resolve_it_exactly_once(store: SessionStore) -> None:
    """UA approved; UB and UC approve at the same instant: both are told it is approved, one
    `input.resolved` is logged, the turn resumes once, the tool runs once more."""
    rt, session, model = await _parked(store, Quorum(2, users=["UA", "UB", "UC"]))
    try:
        await session.resume("T1", "approve", True, principal=_as("UA"))
        tallies = await asyncio.gather(
            session.resume("T1", "approve", True, principal=_as("UB")),
            session.resume("T1", "approve", True, principal=_as("UC")),
            return_exceptions=True,
        )
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()
    decided = [t for t in tallies if not isinstance(t, BaseException)]
    refused = [t for t in tallies if isinstance(t, BaseException)]
    # The later of the two may find the request answered already: refused, nothing changed.
    assert all(t is not None and t.outcome == "approved" for t in decided), tallies
    assert all(isinstance(t, ResumeConflictError) for t in refused), tallies
    assert decided, tallies
    resolved = [e for e in await session.events() if isinstance(e, InputResolved)]
    assert len(resolved) == 1
    assert RAN == ["42", "42"]
    assert len(model.requests) == 2


async def test_a_vote_from_another_workspace_is_refused_and_not_stored(
    store: SessionStore,
) -> None:
    rt, session, _ = await _parked(store, Quorum(2, users=["UA", "UB"]))
    try:
        with pytest.raises(ResumeAuthorizationError, match="another"):
            await session.resume("T1", "approve", True, principal={"team": "T2", "user": "UA"})
        assert await store.list_votes("s1", TimerKind.INPUT, "T1", "approve") == []
        with pytest.raises(ResumeAuthorizationError, match="voter"):
            await session.resume("T1", "approve", True)  # host code naming nobody: no vote
    finally:
        await rt.close()


async def test_a_policy_quorum_asks_the_hook_per_person(store: SessionStore) -> None:
    admitted = {"UA", "UB"}

    async def authorize_answer(request: dict[str, Any]) -> bool:
        return request["policy"] == "finance" and request["by"] in admitted

    quorum = Quorum(2, policy="finance")
    rt, session, _ = await _parked(store, quorum, authorize_answer=authorize_answer)
    try:

        async def grant(user: str) -> Any:
            asked = ResumeRequest(turn_id="T1", input_id="approve", principal=_as(user))
            return await grant_answer(session, asked)

        assert await grant("UC") is None
        with pytest.raises(ResumeAuthorizationError, match="finance"):
            await session.resume("T1", "approve", True, principal=_as("UC"))
        ua = await grant("UA")
        with pytest.raises(ResumeAuthorizationError, match="someone else"):
            await session.resume("T1", "approve", True, principal=_as("UB"), granted=ua)
        first = await session.resume("T1", "approve", True, principal=_as("UA"), granted=ua)
        assert first is not None
        assert first.outcome is None
        ub = await grant("UB")
        last = await session.resume("T1", "approve", True, principal=_as("UB"), granted=ub)
        assert last is not None
        assert last.outcome == "approved"
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()


async def test_a_quorum_reached_by_a_caster_that_died_resolves_on_the_next_click(
    store: SessionStore,
) -> None:
    """The votes were stored (the second reaching the quorum) but the process died before it
    answered the request: the next click, even a repeat by the same voter, resolves it."""
    rt, session, _ = await _parked(store, Quorum(2, users=["UA", "UB"]))
    try:
        parked = await store.get_session("s1")
        assert parked is not None
        for voter in ("UA", "UB"):
            vote = VoteRecord(
                session="s1",
                kind=TimerKind.INPUT,
                turn_id="T1",
                request_id="approve",
                voter=voter,
                approve=True,
                at=1.0,
            )
            await store.cast_vote(vote, expected_pending=parked.pending)
        assert (await store.get_session("s1")).status == SessionStatus.SUSPENDED  # type: ignore[union-attr]
        healed = await session.resume("T1", "approve", True, principal=_as("UB"))
        assert healed is not None
        assert healed.outcome == "approved"
        assert not healed.counted
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()


async def test_a_quorum_request_is_a_yes_or_a_no(store: SessionStore) -> None:
    RAN.clear()
    refund = _refund_tool(Quorum(2, users=["UA", "UB"]), schema={"type": "string"})
    agent = Agent(name="ops", instructions="x", tools=[refund])
    model = _model()
    rt = _runtime(store, agent, model)
    try:
        session = rt.session(agent, "s1")
        done = await session.result(await session.start(slack_event("refund 42"), turn_id="T1"))
        assert done.status == TurnStatus.COMPLETED
    finally:
        await rt.close()
    [result] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert result.is_error, result
    assert "yes or a no" in str(result.result), result


# -- proposed writes ------------------------------------------------------------------------

REFUNDS: list[str] = []


@tool(effect="write", confirmation="required", answerers=Quorum(2, users=["UA", "UB", "UC"]))
async def big_refund(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund a large order (two people must approve)."""
    effect = await ctx.run_effect(f"refund:{order}", lambda auth: _refund(order))
    return {"refunded": effect.value}


async def _refund(order: str) -> str:
    REFUNDS.append(order)
    return order


def _write_model() -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0 and request.messages[-1].role == "user":
            call = ToolCall(id="w1", name="big_refund", input={"order": "42"})
            return ScriptedReply(tool_calls=[call])
        return ScriptedReply(text="reported")

    return ScriptedModel(responder=respond)


async def test_a_proposed_write_runs_once_two_people_approved(store: SessionStore) -> None:
    REFUNDS.clear()
    agent = Agent(name="ops", instructions="x", tools=[big_refund])
    model = _write_model()
    rt = _runtime(store, agent, model)
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund 42"), turn_id="T1"))
        [proposal] = await session.confirmations(ConfirmationStatus.PENDING)
        ident = proposal.confirmation_id
        follow_up = await session.confirm(ident, True, principal=_as("UA"))
        assert await store.get_turn("s1", follow_up) is None, "queued on one vote of two"
        tally = await session.tally("confirm", proposal.turn_id, ident)
        assert tally is not None
        assert tally.approved_by == ("UA",)
        assert tally.outcome is None
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(ident, True, principal=_as("UX"))
        assert await session.confirm(ident, True, principal=_as("UB")) == follow_up
        done = await session.result(follow_up)
        assert done.status == TurnStatus.COMPLETED, done
        with pytest.raises(ResumeConflictError, match="already answered"):
            await session.confirm(ident, False, principal=_as("UC"))
        decided = await session.tally("confirm", proposal.turn_id, ident)
        assert decided is not None
        assert decided.outcome == "approved"
    finally:
        await rt.close()
    assert REFUNDS == ["42"]
    [resolved] = [e for e in await session.events() if isinstance(e, ConfirmationResolved)]
    assert (resolved.accepted, resolved.by, resolved.approved_by) == (True, "UB", ["UA", "UB"])
    turn = await store.get_turn("s1", follow_up)
    assert turn is not None
    assert "UA and UB approved" in turn.input.text, turn.input.text


async def test_a_proposed_write_denied_by_one_of_three_never_runs(store: SessionStore) -> None:
    REFUNDS.clear()
    agent = Agent(name="ops", instructions="x", tools=[big_refund])
    rt = _runtime(store, agent, _write_model())
    try:
        session = rt.session(agent, "s1")
        await session.result(await session.start(slack_event("refund 42"), turn_id="T1"))
        [proposal] = await session.confirmations(ConfirmationStatus.PENDING)
        await session.confirm(proposal.confirmation_id, True, principal=_as("UA"))
        follow_up = await session.confirm(
            proposal.confirmation_id, False, principal=_as("UC"), reason="too big"
        )
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        [record] = await session.confirmations()
        assert (record.status, record.by) == (ConfirmationStatus.DENIED, "UC")
    finally:
        await rt.close()
    assert REFUNDS == []


async def test_answerers_chosen_from_the_arguments_and_a_broken_choice_proposes_nothing(
    store: SessionStore,
) -> None:
    def by_amount(arguments: dict[str, Any]) -> Any:
        if arguments["order"] == "boom":
            raise RuntimeError("secret-token-in-here")
        return Quorum(2, users=["UA", "UB"]) if arguments["order"] == "big" else None

    @tool(effect="write", confirmation="required", answerers=by_amount, name="big_refund")
    async def chosen_refund(order: str, ctx: ToolContext) -> dict[str, Any]:
        """Refund (big ones need two approvers)."""
        return {"refunded": order}

    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0 and request.messages[-1].role == "user":
            order = request.messages[-1].text.split()[-1]
            call = ToolCall(id="w1", name="big_refund", input={"order": order})
            return ScriptedReply(tool_calls=[call])
        return ScriptedReply(text="reported")

    agent = Agent(name="ops", instructions="x", tools=[chosen_refund])
    model = ScriptedModel(responder=respond)
    rt = _runtime(store, agent, model)
    try:
        session = rt.session(agent, "s1")
        for n, order in enumerate(("big", "small", "boom")):
            turn = await session.start(slack_event(f"refund {order}"), turn_id=f"T{n}")
            await session.result(turn)
        proposals = {p.turn_id: p for p in await session.confirmations()}
        assert proposals["T0"].answerers == Quorum(2, users=["UA", "UB"])
        assert proposals["T1"].answerers is not None  # the speaker, by default
        assert "T2" not in proposals
    finally:
        await rt.close()
    failed = [m for r in model.requests for m in r.messages if isinstance(m, ToolMessage)]
    said = [str(m.result) for m in failed if m.is_error]
    assert any("could not choose who confirms" in text for text in said), said
    assert not any("secret-token" in text for text in said)
