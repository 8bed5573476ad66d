"""Edit & approve, in Slack: a proposed write of a tool that lets its approver change arguments
(`@tool(editable=)`) gets a fourth button, whose modal (for someone who may answer) holds the
proposed arguments; its submission runs the call once with what was approved, and the request
says what changed (the card too, and so does a request approved with edits elsewhere). An edit
that breaks the tool's schema is the field's error in the modal, nothing applied; someone who
may not answer gets no modal; a forged submission changes nothing. On SQLite and PostgreSQL,
in both serving modes."""

from __future__ import annotations

import json
import re
from typing import Any, Literal
from urllib.parse import urlencode

import pytest
from pydantic import Field

from agent import (
    Agent,
    ConfirmationStatus,
    Quorum,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    tool,
)
from bot.slack.approval_blocks import APPROVE, DENY, EDIT, ApprovalRef
from bot.slack.edit_modal import EDIT_MODAL
from bot.slack.inbound import session_key
from bot.testing.workspace import Message, View
from tests.bot.harness import Running, eventually, idle
from tests.bot.test_standing_grants import asked as asked_in
from tests.bot.test_standing_grants import cards, elements
from tests.bot.test_standing_grants import proposal as proposal_in

CHANNEL = "C0EDIT"
PAID: list[tuple[str, int, str, str]] = []
"""Every refund the provider paid: order, amount, note, reason."""
pytestmark = pytest.mark.usefixtures("serving")


@tool(effect="write", confirmation="required", editable=["amount", "note", "reason"])
async def refund(
    order_id: str,
    ctx: ToolContext,
    amount: int = Field(gt=0),
    note: str = "",
    reason: Literal["damaged", "late", "other"] = "other",
) -> dict[str, Any]:
    """Refund an order (the approver may change the amount, the note and the reason)."""

    async def pay(authority: Any) -> dict[str, Any]:
        PAID.append((order_id, amount, note, reason))
        return {"refunded": order_id, "amount": amount}

    effect = await ctx.run_effect(f"refund:{order_id}", pay, payload={"amount": amount})
    return dict(effect.value)


@tool(effect="write", confirmation="required")
async def cancel_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Cancel an order (approved as proposed)."""
    return {"cancelled": order_id}


@tool(
    effect="write",
    confirmation="required",
    editable=True,
    answerers=Quorum(2, users=["U0ALICE", "U0BOB"]),
)
async def wire(order_id: str, amount: int, ctx: ToolContext) -> dict[str, Any]:
    """Wire money (two approvers: never edited)."""
    return {"wired": order_id}


AGENT = Agent(name="edit-ops", instructions="Help with orders.", tools=[refund, cancel_order, wire])


def respond(request: Any, step: int) -> ScriptedReply:
    """ "refund order 7" proposes a $400 refund of order 7 (call id `c_refund_7`); "cancel" and
    "wire" their tools; anything else gets a closing line."""
    last = request.messages[-1]
    found = re.search(r"\b(refund|cancel|wire) order (\d+)\s*$", getattr(last, "text", ""))
    if last.role == "user" and found:
        verb, order = found.groups()
        name = {"refund": "refund", "cancel": "cancel_order", "wire": "wire"}[verb]
        arguments: dict[str, Any] = {"order_id": order}
        if verb != "cancel":
            arguments["amount"] = 400
        if verb == "refund":
            arguments["note"] = "as asked"
        call = ToolCall(id=f"c_{verb}_{order}", name=name, input=arguments)
        return ScriptedReply(text="On it.", tool_calls=[call])
    return ScriptedReply(text="Done.")


@pytest.fixture(autouse=True)
def _nothing_paid() -> None:
    PAID.clear()


def _model() -> ScriptedModel:
    return ScriptedModel(responder=respond)


# helpers -------------------------------------------------------------------------------------


async def asked(app: Running, who: str, text: str) -> tuple[str, Message]:
    """`who` mentions the bot; returns the thread's ts and the request it posted there."""
    return await asked_in(app, who, text, channel=CHANNEL)


async def proposal(app: Running, thread: str, request: Message) -> Any:
    """The confirmation record of the request (its buttons name it)."""
    return await proposal_in(app, thread, request, CHANNEL)


def inputs(modal: View) -> dict[str, dict[str, Any]]:
    """The modal's inputs' elements, by argument name."""
    return {
        b["block_id"].removeprefix("edit:"): b["element"]
        for b in modal.body["blocks"]
        if b.get("type") == "input"
    }


async def open_modal(app: Running, who: str, request: Message, thread: str) -> View:
    seen = len(app.standin.modals)
    button = elements(request)[EDIT]
    response = await app.slack.click(
        who, button, channel=CHANNEL, message_ts=request.ts, thread_ts=thread
    )
    assert response.status_code == 200
    await eventually(lambda: len(app.standin.modals) > seen)
    modal: View = app.standin.modals[-1]
    return modal


async def submit(app: Running, who: str, modal: View, **entered: Any) -> Any:
    """`who` submits the modal with `entered` ({argument: typed text, or an option's text}),
    every other input as it was prefilled (as Slack sends it)."""
    values = {f"edit:{name}": {"value": given} for name, given in entered.items()}
    return await app.slack.submit(who, modal.id, values)


def refused(response: Any) -> dict[str, str]:
    """The errors an ack with `response_action: errors` shows in the modal."""
    answer = response.json()
    assert answer["response_action"] == "errors"
    return dict(answer["errors"])


# the button and the modal --------------------------------------------------------------------


async def test_only_an_editable_tool_offers_edit_and_approve(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    _, request = await asked(app, "U0ALICE", "refund order 1")
    _, cancel = await asked(app, "U0ALICE", "cancel order 2")
    _, wired = await asked(app, "U0ALICE", "wire order 3")
    assert set(elements(request)) == {APPROVE, DENY, EDIT}
    assert elements(request)[EDIT]["text"]["text"] == "Edit & approve"
    assert elements(request)[EDIT]["value"] == elements(request)[APPROVE]["value"]
    assert set(elements(cancel)) == {APPROVE, DENY}
    assert set(elements(wired)) == {APPROVE, DENY}  # two approvers: nobody edits alone


async def test_the_modal_opens_for_the_answerer_prefilled_with_the_proposal(
    db_url, launch, standin
):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "refund order 4")
    modal = await open_modal(app, "U0ALICE", request, thread)
    assert modal.user == "U0ALICE"
    assert modal.body["callback_id"] == EDIT_MODAL
    fields = inputs(modal)
    assert list(fields) == ["amount", "note", "reason"]
    assert (fields["amount"]["type"], fields["amount"]["initial_value"]) == ("number_input", "400")
    assert fields["amount"]["is_decimal_allowed"] is False
    assert (fields["note"]["type"], fields["note"]["initial_value"]) == (
        "plain_text_input",
        "as asked",
    )
    assert fields["reason"]["type"] == "static_select"
    assert fields["reason"]["initial_option"]["text"]["text"] == "other"
    assert "order 4" not in json.dumps(fields)  # order_id is not editable
    assert (await proposal(app, thread, request)).status == ConfirmationStatus.PENDING
    assert standin.ephemerals == []


# what an edited approval does ----------------------------------------------------------------


async def test_the_write_runs_once_with_the_edits_and_the_thread_says_what_changed(
    db_url, launch, standin
):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "refund order 10")
    pending = await proposal(app, thread, request)
    modal = await open_modal(app, "U0ALICE", request, thread)
    response = await submit(app, "U0ALICE", modal, amount="40", reason="damaged")
    assert response.status_code == 200
    assert not response.content or "errors" not in response.json()

    # (the model left the reason out, so the tool's default stood for it)
    changes = 'amount from 400 to 40, reason from (not set) to "damaged"'
    said = f"Approved by <@U0ALICE> with changes: {changes}"
    await eventually(lambda: said in request.text, within=30)
    assert elements(request) == {}
    await eventually(lambda: PAID == [("10", 40, "as asked", "damaged")], within=30)
    card = ("complete", f"approved by <@U0ALICE> with changes: {changes}")
    await eventually(lambda: cards(standin, CHANNEL).get("c_refund_10") == card)
    await eventually(lambda: idle(standin, CHANNEL))
    store = app.bot.runtime.store
    record = await store.get_confirmation(pending.session, pending.confirmation_id)
    assert record.status == ConfirmationStatus.ACCEPTED
    assert record.approved_arguments == {
        "order_id": "10",
        "amount": 40,
        "note": "as asked",
        "reason": "damaged",
    }
    assert PAID == [("10", 40, "as asked", "damaged")]  # once
    assert standin.ephemerals == []


async def test_an_approval_with_edits_from_elsewhere_says_so_in_the_thread(db_url, launch, standin):
    """Approved by host code (what the HTTP API calls), not from Slack: the renderer shows the
    changes from `confirmation.resolved`."""
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "refund order 11")
    record = await proposal(app, thread, request)
    session = app.session(session_key("T0DEMO", CHANNEL, thread))
    principal = {"team": "T0DEMO", "user": "U0ALICE"}
    await session.confirm(record.confirmation_id, True, principal=principal, edits={"amount": 5})

    said = "Approved by <@U0ALICE> with changes: amount from 400 to 5"
    await eventually(lambda: said in request.text, within=30)
    await eventually(lambda: PAID == [("11", 5, "as asked", "other")], within=30)
    assert elements(request) == {}


# what is refused -----------------------------------------------------------------------------


async def test_an_edit_that_breaks_the_schema_is_the_fields_error_and_nothing_runs(
    db_url, launch, standin
):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "refund order 20")
    modal = await open_modal(app, "U0ALICE", request, thread)

    # the engine's check (amount must be > 0), shown under the amount's input
    errors = refused(await submit(app, "U0ALICE", modal, amount="0"))
    assert list(errors) == ["edit:amount"]
    assert "greater than 0" in errors["edit:amount"]
    # what the bot cannot read as a whole number (a forged client: Slack's input would not send
    # it) never reaches the engine
    assert refused(await submit(app, "U0ALICE", modal, amount="4.5")) == {
        "edit:amount": "Enter a whole number."
    }
    assert (await proposal(app, thread, request)).status == ConfirmationStatus.PENDING
    assert EDIT in elements(request)
    assert PAID == []
    assert standin.ephemerals == []

    # the same modal, with an amount the tool takes, goes through
    assert (await submit(app, "U0ALICE", modal, amount="25")).status_code == 200
    await eventually(lambda: "with changes: amount from 400 to 25" in request.text, within=30)
    await eventually(lambda: PAID == [("20", 25, "as asked", "other")], within=30)


async def test_someone_who_may_not_answer_cannot_open_the_modal(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "refund order 30")
    button = elements(request)[EDIT]
    response = await app.slack.click(
        "U0MALLORY", button, channel=CHANNEL, message_ts=request.ts, thread_ts=thread
    )
    assert response.status_code == 200
    await eventually(lambda: standin.ephemerals)
    [told] = standin.ephemerals
    assert "can't answer" in told["text"]
    assert told["user"] == "U0MALLORY"
    assert standin.modals == []
    assert EDIT in elements(request)
    assert (await proposal(app, thread, request)).status == ConfirmationStatus.PENDING
    assert PAID == []


async def test_a_forged_submission_applies_nothing(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "refund order 40")
    record = await proposal(app, thread, request)
    modal = await open_modal(app, "U0ALICE", request, thread)

    # another person submits alice's modal (its metadata sealed for her)
    assert (await submit(app, "U0BOB", modal, amount="1")).status_code == 200
    # metadata changed, so its seal does not verify
    sealed = modal.body["private_metadata"]
    body, _, mac = sealed.rpartition(".")
    modal.body["private_metadata"] = f"{body}.{'0' * len(mac)}"
    assert (await submit(app, "U0ALICE", modal, amount="1")).status_code == 200
    modal.body["private_metadata"] = sealed
    # not signed by Slack
    values = {"edit:amount": {"value": "1"}}
    payload = app.slack.submission_payload("U0ALICE", modal.id, values)
    unsigned = urlencode({"payload": json.dumps(payload)})
    forged = await app.slack.send(
        unsigned, content_type="application/x-www-form-urlencoded", secret="wrong"
    )
    assert forged.status_code == 401

    assert (await proposal(app, thread, request)).status == ConfirmationStatus.PENDING
    assert EDIT in elements(request)
    assert PAID == []
    # the person who clicked still can; submitting it unchanged is a plain approval
    assert (await submit(app, "U0ALICE", modal)).status_code == 200
    await eventually(lambda: "Approved by <@U0ALICE>" in request.text, within=30)
    assert "with changes" not in request.text
    await eventually(lambda: PAID == [("40", 400, "as asked", "other")], within=30)
    store = app.bot.runtime.store
    approved = await store.get_confirmation(record.session, record.confirmation_id)
    assert approved.status == ConfirmationStatus.ACCEPTED
    assert approved.approved_arguments is None


# the Home tab -------------------------------------------------------------------------------


def home_actions(standin: Any, user: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The Home tab's request buttons: {request id: {action id: button}}."""
    view = standin.home_views.get(user)
    listed: dict[str, dict[str, dict[str, Any]]] = {}
    for block in view.body["blocks"] if view is not None else []:
        if block["type"] == "actions" and str(block.get("block_id", "")).startswith("approval:"):
            buttons = {e["action_id"]: e for e in block["elements"]}
            listed[ApprovalRef.decode(buttons[APPROVE]["value"]).ident] = buttons
    return listed


async def test_the_home_tab_offers_edit_and_approve_and_its_modal_approves(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    refund_thread, refund_request = await asked(app, "U0ALICE", "refund order 12")
    await asked(app, "U0ALICE", "cancel order 13")
    pending = await proposal(app, refund_thread, refund_request)
    assert (await app.slack.open_home("U0ALICE")).status_code == 200
    await eventually(lambda: len(home_actions(standin, "U0ALICE")) == 2)
    listed = home_actions(standin, "U0ALICE")
    refund_buttons = listed[pending.confirmation_id]
    assert set(refund_buttons) == {APPROVE, DENY, EDIT}
    (cancel_buttons,) = [b for ident, b in listed.items() if ident != pending.confirmation_id]
    assert set(cancel_buttons) == {APPROVE, DENY}  # nothing to edit there

    seen = len(standin.modals)
    clicked = await app.slack.click_in_home("U0ALICE", refund_buttons[EDIT])
    assert clicked.status_code == 200
    await eventually(lambda: len(standin.modals) > seen)
    modal: View = standin.modals[-1]
    assert modal.body["callback_id"] == EDIT_MODAL
    response = await submit(app, "U0ALICE", modal, amount="25")
    assert response.status_code == 200
    await eventually(lambda: PAID == [("12", 25, "as asked", "other")], within=30)
    await eventually(lambda: pending.confirmation_id not in home_actions(standin, "U0ALICE"))
    said = "Approved by <@U0ALICE> with changes: amount from 400 to 25"
    await eventually(lambda: said in refund_request.text, within=30)
