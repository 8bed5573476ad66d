"""Edit, then approve: whoever approves a proposed write of a tool declared `editable` may change
those arguments first. The call runs once, with exactly the approved arguments (the receipt's
fingerprint is theirs), the model reads what changed and by whom, and the record keeps both the
proposed and the approved call. Refused with nothing applied: a field that is not editable, an
edit that breaks the tool's schema, an edit with a denial, a quorum's proposal, a tool that
allows no edits. On every store."""

from __future__ import annotations

from typing import Any

import pytest

from agent import (
    Agent,
    AssemblyError,
    ConfirmationStatus,
    EditRejected,
    EffectAuthority,
    InboundEvent,
    Quorum,
    ResumeAuthorizationError,
    ResumeValidationError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    Speaker,
    ToolCall,
    ToolContext,
    TurnStatus,
    tool,
)
from agent._effects import payload_fingerprint

PAID: list[tuple[str, int, str]] = []


@tool(effect="write", confirmation="required", editable=["amount", "note"])
async def refund(order: str, amount: int, ctx: ToolContext, note: str = "") -> dict[str, Any]:
    """Refund an order (the approver may change the amount and the note)."""

    async def pay(authority: EffectAuthority) -> dict[str, Any]:
        PAID.append((order, amount, note))
        return {"refunded": order, "amount": amount}

    effect = await ctx.run_effect(f"refund:{order}", pay)
    return dict(effect.value)


@tool(effect="write", confirmation="required")
async def cancel(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Cancel an order (approved as proposed, never edited)."""
    return {"cancelled": order}


@tool(
    effect="write",
    confirmation="required",
    editable=True,
    answerers=Quorum(2, users=["UA", "UB"]),
)
async def wire(order: str, amount: int, ctx: ToolContext) -> dict[str, Any]:
    """Wire money (two approvers)."""
    return {"wired": order}


def _approvers(arguments: dict[str, Any]) -> Any:
    """Over 100: two approvers; otherwise the asker."""
    return Quorum(2, users=["UA", "UB"]) if arguments.get("amount", 0) > 100 else None


@tool(effect="write", confirmation="required", editable=["amount"], answerers=_approvers)
async def credit(order: str, amount: int, ctx: ToolContext) -> dict[str, Any]:
    """Credit an account; over 100 needs two approvers."""
    PAID.append((order, amount, "credit"))
    return {"credited": order}


AGENT = Agent(name="ops", instructions="x", tools=[refund, cancel, wire, credit])
PROPOSED = {"order": "A-1", "amount": 400}


def _model(name: str, arguments: dict[str, Any]) -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        last = request.messages[-1]
        if last.role == "user" and last.text == "go":
            return ScriptedReply(tool_calls=[ToolCall(id="c1", name=name, input=arguments)])
        return ScriptedReply(text="done")

    return ScriptedModel(responder=respond)


async def _proposed(store: SessionStore, name: str, **arguments: Any) -> tuple[Runtime, Any]:
    """A runtime whose first turn proposed `name(**arguments)`, and that proposal."""
    rt = Runtime(store, _model(name, arguments), agent=AGENT, poll_interval=0.02)
    session = rt.session(AGENT, "s1")
    inbound = InboundEvent(
        source="slack",
        text="go",
        user=Speaker(id="U1", attested=True),
        context={"team": "T1", "channel": "C1"},
    )
    turn = await session.start(inbound, turn_id="T1")
    assert (await session.result(turn)).status == TurnStatus.COMPLETED
    (proposal,) = await session.confirmations(ConfirmationStatus.PENDING)
    return rt, proposal


def _as(user: str = "U1") -> dict[str, Any]:
    return {"team": "T1", "user": user}


@pytest.fixture(autouse=True)
def _clean() -> None:
    PAID.clear()


async def test_the_call_runs_once_with_the_approved_arguments(store: SessionStore) -> None:
    rt, proposal = await _proposed(store, "refund", **PROPOSED)
    session = rt.session(AGENT, "s1")
    requested = [e for e in await session.events() if e.type == "confirmation.requested"]
    assert requested[-1].confirmation.editable == ["amount", "note"]

    follow_up = await session.confirm(
        proposal.confirmation_id, True, principal=_as(), edits={"amount": "40", "note": "partial"}
    )
    assert (await session.result(follow_up)).status == TurnStatus.COMPLETED

    assert PAID == [("A-1", 40, "partial")]  # once, as approved ("40" read as the int 40)
    approved = {"order": "A-1", "amount": 40, "note": "partial"}
    receipt = await store.get_receipt("s1", "refund:refund:A-1")
    assert receipt is not None
    assert receipt.fingerprint == payload_fingerprint(approved)

    (record,) = await session.confirmations()
    assert record.status == ConfirmationStatus.ACCEPTED
    assert record.arguments == PROPOSED  # the proposal as it was
    assert record.approved_arguments == approved  # what ran

    opening = (await store.get_turn("s1", follow_up)).input.text  # type: ignore[union-attr]
    assert "U1 approved the proposed call refund(" in opening
    assert 'amount from 400 to 40, note from (not set) to "partial"' in opening
    assert "not as proposed" in opening

    resolved = [e for e in await session.events() if e.type == "confirmation.resolved"][-1]
    assert resolved.arguments == approved
    assert resolved.changes == {
        "amount": {"from": 400, "to": 40},
        "note": {"from": None, "to": "partial"},
    }
    await rt.close()


async def test_an_edit_that_changes_nothing_is_a_plain_approval(store: SessionStore) -> None:
    rt, proposal = await _proposed(store, "refund", **PROPOSED)
    session = rt.session(AGENT, "s1")
    follow_up = await session.confirm(
        proposal.confirmation_id, True, principal=_as(), edits={"amount": 400}
    )
    assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
    assert PAID == [("A-1", 400, "")]
    (record,) = await session.confirmations()
    assert record.approved_arguments is None
    await rt.close()


@pytest.mark.parametrize(
    ("edits", "field"),
    [
        ({"order": "B-2"}, "order"),  # not editable
        ({"amount": "forty"}, "amount"),  # breaks the schema
        ({"amount": 40, "reason": "x"}, "reason"),  # not an argument at all
    ],
)
async def test_an_edit_that_does_not_fit_is_refused_and_nothing_runs(
    store: SessionStore, edits: dict[str, Any], field: str
) -> None:
    rt, proposal = await _proposed(store, "refund", **PROPOSED)
    session = rt.session(AGENT, "s1")
    with pytest.raises(EditRejected) as refused:
        await session.confirm(proposal.confirmation_id, True, principal=_as(), edits=edits)
    assert refused.value.http_status == 422
    assert field in refused.value.fields
    assert PAID == []
    (record,) = await session.confirmations()
    assert record.status == ConfirmationStatus.PENDING  # still waiting; approve it as is
    follow_up = await session.confirm(proposal.confirmation_id, True, principal=_as())
    assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
    assert PAID == [("A-1", 400, "")]
    await rt.close()


async def test_edits_are_refused_where_they_cannot_apply(store: SessionStore) -> None:
    rt, proposal = await _proposed(store, "refund", **PROPOSED)
    session = rt.session(AGENT, "s1")
    with pytest.raises(ResumeValidationError, match="denial runs nothing"):
        await session.confirm(proposal.confirmation_id, False, principal=_as(), edits={"amount": 1})
    with pytest.raises(ResumeAuthorizationError):  # who may answer is checked first, as ever
        await session.confirm(
            proposal.confirmation_id, True, principal=_as("U9"), edits={"amount": 1}
        )
    assert (await session.confirmations())[0].status == ConfirmationStatus.PENDING
    await rt.close()


async def test_a_tool_that_allows_no_edits_refuses_them(store: SessionStore) -> None:
    rt, proposal = await _proposed(store, "cancel", order="A-1")
    session = rt.session(AGENT, "s1")
    requested = [e for e in await session.events() if e.type == "confirmation.requested"]
    assert requested[-1].confirmation.editable is None
    with pytest.raises(ResumeValidationError, match="cannot be edited"):
        await session.confirm(proposal.confirmation_id, True, principal=_as(), edits={"order": "B"})
    await rt.close()


async def test_a_quorum_proposal_cannot_be_edited(store: SessionStore) -> None:
    rt, proposal = await _proposed(store, "wire", order="A-1", amount=5)
    session = rt.session(AGENT, "s1")
    requested = [e for e in await session.events() if e.type == "confirmation.requested"]
    assert requested[-1].confirmation.editable is None  # not offered
    with pytest.raises(ResumeValidationError, match="several approvals"):
        await session.confirm(
            proposal.confirmation_id, True, principal=_as("UA"), edits={"amount": 1}
        )
    assert (await session.confirmations())[0].status == ConfirmationStatus.PENDING
    await rt.close()


async def test_an_edit_that_would_need_other_approvers_is_refused(store: SessionStore) -> None:
    """Who confirms was chosen from the proposed call: raising a credit past the two-approver
    line is not for the one approver of the small one to decide."""
    rt, proposal = await _proposed(store, "credit", order="A-1", amount=50)
    session = rt.session(AGENT, "s1")
    with pytest.raises(EditRejected, match="needs other approvers") as refused:
        await session.confirm(
            proposal.confirmation_id, True, principal=_as(), edits={"amount": 5000}
        )
    assert list(refused.value.fields) == ["amount"]
    assert PAID == []
    follow_up = await session.confirm(
        proposal.confirmation_id, True, principal=_as(), edits={"amount": 60}
    )
    assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
    assert PAID == [("A-1", 60, "credit")]
    await rt.close()


def test_editable_is_checked_where_the_tool_is_declared() -> None:
    async def f(order: str, ctx: ToolContext) -> None: ...

    with pytest.raises(AssemblyError, match="'amount'"):
        tool(effect="write", confirmation="required", editable=["amount"])(f)
    with pytest.raises(AssemblyError, match="confirmation='required'"):
        tool(effect="write", confirmation="capability", editable=True)(f)
    with pytest.raises(AssemblyError, match="list of argument names"):
        tool(effect="write", confirmation="required", editable="order")(f)
    assert tool(effect="write", confirmation="required", editable=True)(f).editable == ("order",)
