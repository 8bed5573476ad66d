"""`confirmation="capability"`: the tool runs first, gathers the details a person must see and
asks with `ctx.needs_confirmation`; the engine records that interaction like any proposed write,
and on the answer the tool runs again and may write only once `ctx.confirmed(details)` says the
person approved exactly these details."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from agent import (
    Agent,
    ConfirmationStatus,
    Grant,
    NeedsConfirmation,
    PolicyAnswerer,
    ReceiptStatus,
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
    UserAnswerer,
    UserMessage,
    grant_confirmation,
    tool,
)
from agent._hitl_confirm import confirmation_digest
from tests.support.hitl_fixtures import slack_event

S = "slack:T1:C1:1.0"
PRICES: dict[str, int] = {}
RUNS: list[str] = []
"""Every time a tool's body ran (it runs in the proposing turn and again after an approval)."""
CHARGES: list[dict[str, Any]] = []
"""Every time the provider was called."""


@pytest.fixture(autouse=True)
def _fresh() -> None:
    PRICES.clear()
    PRICES["o1"] = 42
    RUNS.clear()
    CHARGES.clear()


async def _provider(details: dict[str, Any], key: str) -> dict[str, Any]:
    CHARGES.append({**details, "key": key})
    return {"charge": f"ch-{details['order']}-{details['amount']}"}


def _charge_tool(answerers: dict[str, Any] | None = None) -> Any:
    @tool(effect="write", confirmation="capability", name="charge", answerers=answerers)
    async def charge(order: str, ctx: ToolContext) -> Any:
        """Charge an order what it costs now; the person approves the amount."""
        RUNS.append(order)
        details = {"order": order, "amount": PRICES[order]}
        if not ctx.confirmed(details):
            return ctx.needs_confirmation(
                prompt=f"Charge order {order} ${details['amount']}?", details=details
            )
        effect = await ctx.run_effect(
            f"charge:{order}", lambda auth: _provider(details, auth.idempotency_key), details
        )
        return {"charged": effect.value, "receipt": effect.receipt.status.value}

    return charge


def _model(name: str = "charge", arguments: dict[str, Any] | None = None) -> ScriptedModel:
    """A person's message makes one call; afterwards the model repeats what it read."""

    def respond(request: Any, step: int) -> ScriptedReply:
        opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
        last = request.messages[-1]
        if isinstance(opening, UserMessage) and step == 0:
            call = ToolCall(id="c", name=name, input=arguments or {"order": "o1"})
            return ScriptedReply(tool_calls=[call])
        if isinstance(last, ToolMessage):
            return ScriptedReply(text=json.dumps(last.result, sort_keys=True))
        return ScriptedReply(text=f"Noted: {opening.text}")

    return ScriptedModel(responder=respond)


def _rt(store: SessionStore, agent: Agent, model: ScriptedModel | None = None) -> Runtime:
    return Runtime(store, model or _model(), agent=agent, poll_interval=0.02)


def _tool_results(transcript: list[Any], turn_id: str | None = None) -> list[ToolMessage]:
    return [
        m
        for m in transcript
        if isinstance(m, ToolMessage) and (turn_id is None or m.turn_id == turn_id)
    ]


async def _propose(store: SessionStore, agent: Agent) -> Any:
    async with _rt(store, agent) as rt:
        result = await rt.session(agent, S).turn(slack_event("charge o1", user="U1"), turn_id="T1")
    assert result.status == TurnStatus.COMPLETED
    [pending] = await store.list_confirmations(S)
    return pending


async def test_the_capability_records_its_own_interaction(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[_charge_tool()])
    pending = await _propose(store, agent)

    assert RUNS == ["o1"], "the capability runs in the proposing turn to gather its details"
    assert CHARGES == []
    assert await store.list_receipts(session=S) == []
    assert pending.status == ConfirmationStatus.PENDING
    assert (pending.confirmation_id, pending.turn_id, pending.call_id) == ("T1:c", "T1", "c")
    assert pending.tool == "charge"
    assert pending.arguments == {"order": "o1"}
    assert pending.prompt == "Charge order o1 $42?"
    assert pending.details == {"order": "o1", "amount": 42}
    assert pending.answerers == UserAnswerer(user="U1")
    [read] = _tool_results(await store.load_transcript(S))
    assert not read.is_error
    assert read.result["status"] == "confirmation_pending"
    assert read.result["confirmation_id"] == "T1:c"
    [requested] = [e for e in await store.read_events(S) if e.type == "confirmation.requested"]
    assert requested.confirmation.prompt == "Charge order o1 $42?"
    assert requested.confirmation.details == {"order": "o1", "amount": 42}


async def test_an_approval_runs_the_tool_again_and_lets_it_write_once(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[_charge_tool()])
    pending = await _propose(store, agent)
    async with _rt(store, agent) as rt:
        session = rt.session(agent, S)
        follow_up = await session.confirm(pending.confirmation_id, True, by="U1")
        done = await session.result(follow_up)

    assert done.status == TurnStatus.COMPLETED
    assert RUNS == ["o1", "o1"], "the tool ran again, from the top"
    assert CHARGES == [{"order": "o1", "amount": 42, "key": "charge:charge:o1"}]
    receipt = await store.get_receipt(S, "charge:charge:o1")
    assert receipt is not None
    assert (receipt.status, receipt.turn_id) == (ReceiptStatus.COMPLETED, follow_up)
    [ran] = _tool_results(await store.load_transcript(S), follow_up)
    assert ran.result == {"charged": {"charge": "ch-o1-42"}, "receipt": "completed"}
    [answered] = await store.list_confirmations(S)
    assert (answered.status, answered.by) == (ConfirmationStatus.ACCEPTED, "U1")


async def test_a_denial_never_runs_the_tool(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[_charge_tool()])
    pending = await _propose(store, agent)
    async with _rt(store, agent) as rt:
        session = rt.session(agent, S)
        done = await session.result(await session.confirm(pending.confirmation_id, False, by="U1"))

    assert done.status == TurnStatus.COMPLETED
    assert "denied" in done.text
    assert RUNS == ["o1"], "only the proposing turn ran the tool"
    assert CHARGES == []
    assert await store.list_receipts(session=S) == []
    [answered] = await store.list_confirmations(S)
    assert answered.status == ConfirmationStatus.DENIED


async def test_details_that_changed_since_the_approval_are_asked_for_again(
    store: SessionStore,
) -> None:
    agent = Agent(name="a", instructions="x", tools=[_charge_tool()])
    pending = await _propose(store, agent)
    PRICES["o1"] = 50  # the price moved while the person was reading
    async with _rt(store, agent) as rt:
        session = rt.session(agent, S)
        follow_up = await session.confirm(pending.confirmation_id, True, by="U1")
        done = await session.result(follow_up)

        assert done.status == TurnStatus.COMPLETED
        assert CHARGES == [], "$42 was approved, not $50"
        assert await store.list_receipts(session=S) == []
        [asked] = _tool_results(await store.load_transcript(S), follow_up)
        assert asked.result["status"] == "confirmation_pending"
        old, new = await store.list_confirmations(S)
        assert (old.confirmation_id, old.status) == ("T1:c", ConfirmationStatus.ACCEPTED)
        assert new.status == ConfirmationStatus.PENDING
        assert new.turn_id == follow_up
        assert new.details == {"order": "o1", "amount": 50}
        assert new.prompt == "Charge order o1 $50?"
        assert new.answerers == UserAnswerer(user="U1"), "the person who confirmed is asked again"

        # approving what is now shown writes it
        again = await session.result(await session.confirm(new.confirmation_id, True, by="U1"))
    assert again.status == TurnStatus.COMPLETED
    assert CHARGES == [{"order": "o1", "amount": 50, "key": "charge:charge:o1"}]


async def test_run_effect_without_a_checked_answer_is_refused(store: SessionStore) -> None:
    @tool(effect="write", confirmation="capability", name="charge")
    async def eager(order: str, ctx: ToolContext) -> Any:
        """Writes before anybody was asked."""
        details = {"order": order, "amount": PRICES[order]}
        await ctx.run_effect(f"charge:{order}", lambda auth: _provider(details, "k"))
        return "charged"

    @tool(effect="write", confirmation="capability", name="charge")
    async def careless(order: str, ctx: ToolContext) -> Any:
        """Asks whether it was confirmed and writes anyway."""
        details = {"order": order, "amount": PRICES[order]}
        ctx.confirmed(details)
        await ctx.run_effect(f"charge:{order}", lambda auth: _provider(details, "k"))
        return "charged"

    for index, charge in enumerate((eager, careless)):
        key = f"{S}:{index}"
        agent = Agent(name="a", instructions="x", tools=[charge])
        async with _rt(store, agent) as rt:
            done = await rt.session(agent, key).turn(slack_event("charge o1", user="U1"))
        assert done.status == TurnStatus.COMPLETED
        [refused] = _tool_results(await store.load_transcript(key))
        assert refused.is_error
        assert refused.result["error"] == (
            "ToolError: a confirmation='capability' tool must get an accepted answer and check "
            "it with ctx.confirmed(details) before run_effect"
        )
        assert json.loads(done.text) == refused.result, "the model read the refusal"
        assert CHARGES == []
        assert await store.list_receipts(session=key) == []
        assert await store.list_confirmations(key) == []


async def test_a_capability_must_ask_through_the_engine(store: SessionStore) -> None:
    """A dict that merely says `needs_confirmation` records nothing, so it is a write that was
    not coordinated, as it is for any write tool."""

    @tool(effect="write", confirmation="capability", name="charge")
    async def homemade(order: str, ctx: ToolContext) -> Any:
        """Asks in its own words."""
        return {"needs_confirmation": True, "prompt": f"Charge {order}?"}

    agent = Agent(name="a", instructions="x", tools=[homemade])
    async with _rt(store, agent) as rt:
        await rt.session(agent, S).turn(slack_event("charge o1", user="U1"))
    [refused] = _tool_results(await store.load_transcript(S))
    assert refused.is_error
    assert "finished without calling ctx.run_effect" in refused.result["error"]
    assert await store.list_confirmations(S) == []


async def test_only_a_capability_tool_asks_for_confirmation(store: SessionStore) -> None:
    @tool(name="look")
    async def remote_read(order: str, ctx: ToolContext) -> Any:
        """A read that asks anyway."""
        return ctx.needs_confirmation(prompt="ok?", details={"order": order})

    @tool(name="look")
    def local_read(order: str, ctx: ToolContext) -> Any:
        """A local tool that asks."""
        return ctx.needs_confirmation(prompt="ok?", details={"order": order})

    @tool(name="look")
    async def handmade(order: str) -> Any:
        """A read that builds the request itself."""
        return NeedsConfirmation(prompt="ok?", details={"order": order})

    @tool(name="look")
    async def checks(order: str, ctx: ToolContext) -> Any:
        """A read that checks an answer nobody was asked for."""
        return ctx.confirmed({"order": order})

    expected = [
        (remote_read, "only a confirmation='capability' tool can ask"),
        (local_read, "a local (def) tool runs inside the step's transaction"),
        (handmade, "returned needs_confirmation, but only an async confirmation='capability'"),
        (checks, "only a confirmation='capability' tool"),
    ]
    for index, (look, text) in enumerate(expected):
        key = f"{S}:{index}"
        agent = Agent(name="a", instructions="x", tools=[look])
        async with _rt(store, agent, _model("look")) as rt:
            await rt.session(agent, key).turn(slack_event("look at o1", user="U1"))
        [refused] = _tool_results(await store.load_transcript(key))
        assert refused.is_error, look.name
        assert refused.result["error"].startswith("ToolError: "), refused.result
        assert text in refused.result["error"]
        assert await store.list_confirmations(key) == []


async def test_a_forged_click_is_refused(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[_charge_tool()])
    pending = await _propose(store, agent)
    async with _rt(store, agent) as rt:
        session = rt.session(agent, S)
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(pending.confirmation_id, True, by="U666")
        with pytest.raises(ResumeAuthorizationError):
            await session.confirm(pending.confirmation_id, True)
    assert CHARGES == []
    assert RUNS == ["o1"]
    assert await store.list_confirmations(S) == [pending]


async def test_a_grant_binds_to_the_details_shown(store: SessionStore) -> None:
    async def authorize_answer(request: dict[str, Any]) -> bool:
        return request["by"] == "OPS"

    answerers = {"policy": "billing", "scope": "charges"}
    agent = Agent(
        name="a",
        instructions="x",
        tools=[_charge_tool(answerers)],
        authorize_answer=authorize_answer,
    )
    pending = await _propose(store, agent)
    assert pending.answerers == PolicyAnswerer(policy="billing", scope="charges")
    other = replace(pending, details={"order": "o1", "amount": 4200})
    assert confirmation_digest(other) != confirmation_digest(pending), "the digest covers details"
    async with _rt(store, agent) as rt:
        session = rt.session(agent, S)
        stale = Grant(
            policy="billing", scope="charges", by="OPS", digest=confirmation_digest(other)
        )
        with pytest.raises(ResumeAuthorizationError, match="different request"):
            await session.confirm(pending.confirmation_id, True, by="OPS", granted=stale)
        assert CHARGES == []
        grant = await grant_confirmation(session, pending.confirmation_id, by="OPS")
        assert grant is not None
        assert grant.digest == confirmation_digest(pending)
        done = await session.result(
            await session.confirm(pending.confirmation_id, True, by="OPS", granted=grant)
        )
    assert done.status == TurnStatus.COMPLETED
    assert [c["amount"] for c in CHARGES] == [42]


async def test_the_follow_up_says_what_was_approved(store: SessionStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[_charge_tool()])
    pending = await _propose(store, agent)
    async with _rt(store, agent) as rt:
        session = rt.session(agent, S)
        follow_up = await session.confirm(pending.confirmation_id, True, by="U1")
        await session.result(follow_up)
    opening = next(m for m in await store.load_transcript(S) if m.turn_id == follow_up)
    assert isinstance(opening, TriggerMessage)
    assert '"amount": 42' in opening.text
    turn = await store.get_turn(S, follow_up)
    assert turn is not None
    assert turn.input.confirmation is not None
    assert turn.input.confirmation.details == {"order": "o1", "amount": 42}
