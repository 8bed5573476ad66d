"""Edit, then approve, over HTTP: `GET pending` says which arguments an approval may change,
a confirmation's `edits` runs the call once with them (the reply's `approved_arguments`), and an
edit the tool refuses (an argument that is not editable, a value its schema rejects) is a 422
naming each field, with nothing applied: the proposal still waits and runs as proposed once
approved plainly. Someone who may not answer gets a 403, edits or not. On SQLite and PostgreSQL,
in both serving modes."""

from __future__ import annotations

import re
from typing import Annotated, Any

import pytest
from pydantic import Field

from agent import Agent, ScriptedModel, ScriptedReply, ToolCall, ToolContext, tool
from tests.api.conftest import TEAM
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")
KEY = f"api:{TEAM}:refunds"
PAID: list[tuple[str, int]] = []
"""Every refund paid (the write's effect), with its amount."""


@tool(effect="write", confirmation="required", editable=["amount"])
async def refund(
    order_id: str, amount: Annotated[int, Field(gt=0, le=500)], ctx: ToolContext
) -> dict[str, Any]:
    """Refund an order; the approver may change the amount (1 to 500)."""

    async def pay(authority: Any) -> dict[str, Any]:
        PAID.append((order_id, amount))
        return {"refunded": order_id, "amount": amount}

    effect = await ctx.run_effect(f"refund:{order_id}", pay)
    return dict(effect.value)


AGENT = Agent(name="api-edits", instructions="Refund orders.", tools=[refund])


def respond(request: Any, step: int) -> ScriptedReply:
    """ "refund order 7" proposes a refund of 400 for order 7; anything else closes the turn."""
    last = request.messages[-1]
    found = re.search(r"\brefund order (\d+)\s*$", getattr(last, "text", ""))
    if last.role == "user" and found:
        order = found.group(1)
        call = ToolCall(id=f"c_{order}", name="refund", input={"order_id": order, "amount": 400})
        return ScriptedReply(text="On it.", tool_calls=[call])
    return ScriptedReply(text="Done.")


@pytest.fixture(autouse=True)
def _no_refunds() -> None:
    PAID.clear()


async def _propose(alice, order: str) -> dict[str, Any]:
    turn = await alice.post(
        "/sessions/refunds/turns", json={"text": f"refund order {order}", "turn_id": f"t{order}"}
    )
    assert turn.status_code == 200, turn.text
    [waiting] = (await alice.get("/sessions/refunds/pending")).json()["confirmations"]
    return dict(waiting)


async def _completed(alice, turn_id: str) -> None:
    async def done() -> bool:
        turn = await alice.get(f"/sessions/refunds/turns/{turn_id}")
        return bool(turn.json()["status"] == "completed")

    await eventually(done, within=30)


async def test_an_approval_with_edits_runs_the_edited_call_once(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(responder=respond))
    alice = clients(bot, "alice")
    proposal = await _propose(alice, "1")
    assert proposal["editable"] == ["amount"]
    path = f"/sessions/refunds/confirmations/{proposal['confirmation_id']}"

    answered = await alice.post(
        path, json={"accepted": True, "digest": proposal["digest"], "edits": {"amount": 40}}
    )
    assert answered.status_code == 202, answered.text
    assert answered.json()["approved_arguments"] == {"order_id": "1", "amount": 40}
    await _completed(alice, answered.json()["turn_id"])
    assert PAID == [("1", 40)]


@pytest.mark.parametrize(
    ("edits", "field"),
    [({"order_id": "2"}, "order_id"), ({"amount": 900}, "amount"), ({"amount": "x"}, "amount")],
)
async def test_an_edit_the_tool_refuses_is_a_422_naming_the_field(
    db_url, api, clients, edits: dict[str, Any], field: str
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(responder=respond))
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    proposal = await _propose(alice, "1")
    path = f"/sessions/refunds/confirmations/{proposal['confirmation_id']}"

    refused = await alice.post(path, json={"accepted": True, "edits": edits})
    assert refused.status_code == 422, refused.text
    assert refused.json()["detail"][0]["loc"] == ["body", "edits", field]
    forbidden = await bob.post(path, json={"accepted": True, "edits": {"amount": 1}})
    assert forbidden.status_code == 403
    assert PAID == []
    still = (await alice.get("/sessions/refunds/pending")).json()["confirmations"]
    assert [p["confirmation_id"] for p in still] == [proposal["confirmation_id"]]

    plain = await alice.post(path, json={"accepted": True})
    assert plain.status_code == 202, plain.text
    assert plain.json()["approved_arguments"] is None
    await _completed(alice, plain.json()["turn_id"])
    assert PAID == [("1", 400)]


async def test_the_confirmations_audit_keeps_the_proposed_and_the_approved_call(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(responder=respond))
    alice, eve = clients(bot, "alice"), clients(bot, "eve")
    first = await _propose(alice, "1")
    path = f"/sessions/refunds/confirmations/{first['confirmation_id']}"
    edited = await alice.post(path, json={"accepted": True, "edits": {"amount": 40}})
    await _completed(alice, edited.json()["turn_id"])
    second = await _propose(alice, "2")

    audit = await alice.get("/sessions/refunds/confirmations")
    assert audit.status_code == 200, audit.text
    newest, oldest = audit.json()["confirmations"]
    assert (newest["confirmation_id"], newest["status"]) == (second["confirmation_id"], "pending")
    assert (oldest["status"], oldest["by"]) == ("accepted", "U0ALICE")
    assert oldest["arguments"] == {"order_id": "1", "amount": 400}
    assert oldest["approved_arguments"] == {"order_id": "1", "amount": 40}
    assert oldest["follow_up_turn"] == edited.json()["turn_id"]
    limited = await alice.get("/sessions/refunds/confirmations", params={"limit": 1})
    assert [c["confirmation_id"] for c in limited.json()["confirmations"]] == [
        second["confirmation_id"]
    ]
    assert (await eve.get("/sessions/refunds/confirmations")).status_code == 404
