"""Approve & allow again, in Slack: a proposed write of a tool that allows standing grants gets a
third button, whose modal (for someone who may answer) offers where and how long, up to the
tool's limit; its submission approves and allows the tool's later calls by the same person in
that thread or channel, which then run with no request, their card saying whose grant let them.
Someone else's calls are still asked; a span past the limit is refused in the modal with
nothing applied; the Home tab lists the grant to whom gave it and whom it covers, and Revoke
there makes the next call ask again. On SQLite and PostgreSQL, in both serving modes."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlencode

import pytest

from agent import (
    GRANTS_POLICY,
    Agent,
    AnswerRequest,
    ConfirmationStatus,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    standing_grants,
    tool,
)
from bot.slack.approval_blocks import ALLOW_AGAIN, APPROVE, DENY, ApprovalRef
from bot.slack.grant_modal import SCOPE_ACTION, SCOPE_BLOCK, SPAN_ACTION, SPAN_BLOCK
from bot.slack.home_grants import NO_GRANTS, REVOKE_GRANT
from bot.slack.inbound import session_key
from bot.testing.workspace import Message, View, is_request
from tests.bot.harness import Running, eventually, idle

CHANNEL = "C0GRANT"
OTHER = "C0GRAN2"
DAY = 86_400
BOSS, ADMIN = "U0BOSS", "U0ADMIN"
HELD: list[str] = []
"""Every order the provider put on hold (a grantable write)."""
pytestmark = pytest.mark.usefixtures("serving")


@tool(effect="write", confirmation="required", grantable_for=DAY)
async def place_hold(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Put an order on hold (approved once; maybe allowed again for up to a day)."""

    async def hold(authority: Any) -> dict[str, Any]:
        HELD.append(order_id)
        return {"held": order_id}

    effect = await ctx.run_effect(f"hold:{order_id}", hold, payload={"order_id": order_id})
    return dict(effect.value)


@tool(effect="write", confirmation="required", grantable_for=36 * 3600)
async def lock_account(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Lock the account behind an order (may be allowed again for up to 36 hours)."""
    return {"locked": order_id}


@tool(effect="write", confirmation="required")
async def cancel_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Cancel an order (every call is asked)."""
    return {"cancelled": order_id}


@tool(
    effect="write",
    confirmation="required",
    grantable_for=DAY,
    answerers={"policy": "managers", "scope": "refunds"},
)
async def small_refund(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Refund a small order (a manager approves)."""
    return {"refunded": order_id}


async def managers_and_admins(request: AnswerRequest) -> bool:
    principal = request["principal"]
    if principal.get("team") != "T0DEMO":
        return False
    if request["policy"] == GRANTS_POLICY:
        return principal.get("user") == ADMIN
    return request["policy"] == "managers" and principal.get("user") == BOSS


AGENT = Agent(
    name="grant-ops",
    instructions="Help with orders.",
    tools=[place_hold, lock_account, cancel_order, small_refund],
    authorize_answer=managers_and_admins,
)
VERBS = {"hold": "place_hold", "lock": "lock_account", "cancel": "cancel_order"}
VERBS["refund"] = "small_refund"


def respond(request: Any, step: int) -> ScriptedReply:
    """ "hold order 7" calls place_hold for order 7 (call id `c_hold_7`); anything else (a tool's
    result, an answer's follow-up) gets a closing line."""
    last = request.messages[-1]
    found = re.search(r"\b(hold|lock|cancel|refund) order (\d+)\s*$", getattr(last, "text", ""))
    if last.role == "user" and found:
        verb, order = found.groups()
        call = ToolCall(id=f"c_{verb}_{order}", name=VERBS[verb], input={"order_id": order})
        return ScriptedReply(text="On it.", tool_calls=[call])
    return ScriptedReply(text="Done.")


@pytest.fixture(autouse=True)
def _no_holds() -> None:
    HELD.clear()


def _model() -> ScriptedModel:
    return ScriptedModel(responder=respond)


# helpers -------------------------------------------------------------------------------------


def requests(standin: Any, channel: str = CHANNEL, thread: str | None = None) -> list[Message]:
    return [
        m
        for m in standin.bot_messages(channel)
        if is_request(m) and (thread is None or thread in (m.thread_ts, m.ts))
    ]


def elements(message: Message) -> dict[str, dict[str, Any]]:
    """The request's buttons by action id (none once it is answered)."""
    actions = [b for b in message.blocks or [] if b.get("type") == "actions"]
    return {e["action_id"]: e for b in actions for e in b["elements"]}


def cards(standin: Any, channel: str) -> dict[str, tuple[str, str | None]]:
    return {
        str(t["id"]): (str(t["status"]), t.get("output"))
        for m in standin.bot_messages(channel)
        if not is_request(m)
        for t in m.tasks.values()
        if t["id"] != "status"
    }


def options(modal: View, block_id: str) -> list[dict[str, Any]]:
    block = next(b for b in modal.body["blocks"] if b.get("block_id") == block_id)
    return list(block["element"]["options"])


def texts(options_: list[dict[str, Any]]) -> list[str]:
    return [o["text"]["text"] for o in options_]


def home(standin: Any, user: str) -> str:
    view = standin.home_views.get(user)
    return "" if view is None else str(standin.render_view(view))


def told(standin: Any, user: str, words: str) -> bool:
    """Some Home tab `user` was shown said `words`."""
    return any(
        call.args.get("user_id") == user and words in json.dumps(call.args.get("view"))
        for call in standin.calls_to("views.publish")
        if call.response.get("ok")
    )


def revoke_buttons(standin: Any, user: str) -> list[dict[str, Any]]:
    view = standin.home_views.get(user)
    blocks = view.body["blocks"] if view is not None else []
    return [
        b["accessory"]
        for b in blocks
        if b.get("type") == "section" and b.get("accessory", {}).get("action_id") == REVOKE_GRANT
    ]


async def asked(
    app: Running, who: str, text: str, *, channel: str = CHANNEL, thread: str | None = None
) -> tuple[str, Message]:
    """`who` mentions the bot; returns the thread's ts and the request it posted there."""
    before = {m.ts for m in requests(app.standin, channel)}
    ts = await app.slack.mention(who, text, channel=channel, thread_ts=thread)
    root = thread or ts

    def new() -> list[Message]:
        return [m for m in requests(app.standin, channel, root) if m.ts not in before]

    [request] = await eventually(new, within=30)
    await eventually(lambda: idle(app.standin, channel))
    return root, request


async def proposal(app: Running, thread: str, request: Message, channel: str = CHANNEL) -> Any:
    """The confirmation record of the request (its buttons name it)."""
    ref = ApprovalRef.decode(elements(request)[APPROVE]["value"])
    key = session_key("T0DEMO", channel, thread)
    return await app.bot.runtime.store.get_confirmation(key, ref.ident)


async def open_modal(
    app: Running, who: str, request: Message, thread: str, channel: str = CHANNEL
) -> View:
    seen = len(app.standin.modals)
    button = elements(request)[ALLOW_AGAIN]
    response = await app.slack.click(
        who, button, channel=channel, message_ts=request.ts, thread_ts=thread
    )
    assert response.status_code == 200
    await eventually(lambda: len(app.standin.modals) > seen)
    modal: View = app.standin.modals[-1]
    return modal


async def choose(
    app: Running,
    who: str,
    modal: View,
    scope: str = "This thread",
    span: str = "1 day",
    *,
    span_option: dict[str, Any] | None = None,
) -> Any:
    """Submit the modal with the options whose texts are given (as Slack sends a radio and a
    select's state); `span_option`: one the modal did not offer (a forged client)."""
    scope_option = next(o for o in options(modal, SCOPE_BLOCK) if o["text"]["text"] == scope)
    chosen = span_option or next(o for o in options(modal, SPAN_BLOCK) if o["text"]["text"] == span)
    payload = app.slack.submission_payload(who, modal.id, {})
    payload["view"]["state"]["values"] = {
        SCOPE_BLOCK: {SCOPE_ACTION: {"type": "radio_buttons", "selected_option": scope_option}},
        SPAN_BLOCK: {SPAN_ACTION: {"type": "static_select", "selected_option": chosen}},
    }
    body = urlencode({"payload": json.dumps(payload)})
    return await app.slack.send(body, content_type="application/x-www-form-urlencoded")


async def granted(app: Running, who: str, text: str, scope: str = "This thread", **kw: Any):
    """`who` asks for `text` and approves it with "Approve & allow again" (1 day)."""
    thread, request = await asked(app, who, text, **kw)
    modal = await open_modal(app, who, request, thread, kw.get("channel", CHANNEL))
    assert (await choose(app, who, modal, scope)).status_code == 200
    where = "this thread" if scope == "This thread" else "this channel"
    said = f"Approved by <@{who}> and allowed it again in {where} for 1 day"
    await eventually(lambda: said in request.text, within=30)
    return thread, request


# the button and the modal --------------------------------------------------------------------


async def test_only_a_grantable_tool_offers_approve_and_allow_again(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    _, hold = await asked(app, "U0ALICE", "hold order 1")
    _, cancel = await asked(app, "U0ALICE", "cancel order 2")
    assert set(elements(hold)) == {APPROVE, DENY, ALLOW_AGAIN}
    assert elements(hold)[ALLOW_AGAIN]["text"]["text"] == "Approve & allow again"
    assert elements(hold)[ALLOW_AGAIN]["value"] == elements(hold)[APPROVE]["value"]
    assert set(elements(cancel)) == {APPROVE, DENY}


async def test_the_modal_offers_only_spans_within_the_tools_limit(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    thread, hold = await asked(app, "U0ALICE", "hold order 3")
    modal = await open_modal(app, "U0ALICE", hold, thread)
    assert modal.user == "U0ALICE"
    assert texts(options(modal, SCOPE_BLOCK)) == ["This thread", "This channel"]
    assert texts(options(modal, SPAN_BLOCK)) == ["1 hour", "8 hours", "1 day"]

    thread, lock = await asked(app, "U0ALICE", "lock order 4")
    modal = await open_modal(app, "U0ALICE", lock, thread)
    # 36 hours is not one of the usual spans: it is offered too, and nothing longer
    assert texts(options(modal, SPAN_BLOCK)) == ["1 hour", "8 hours", "1 day", "36 hours"]
    assert (await proposal(app, thread, lock)).status == ConfirmationStatus.PENDING


# what a grant lets through -------------------------------------------------------------------


async def test_allowed_again_the_next_call_in_the_thread_runs_without_asking(
    db_url, launch, standin
):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await granted(app, "U0ALICE", "hold order 10")
    assert elements(request) == {}  # answered: no buttons left
    await eventually(lambda: HELD == ["10"], within=30)
    await eventually(lambda: idle(standin, CHANNEL))

    await app.slack.mention("U0ALICE", "hold order 11", channel=CHANNEL, thread_ts=thread)
    await eventually(lambda: "11" in HELD, within=30)
    card = "allowed again by <@U0ALICE> (standing grant)"
    await eventually(lambda: cards(standin, CHANNEL).get("c_hold_11") == ("complete", card))
    await eventually(lambda: idle(standin, CHANNEL))
    assert len(requests(standin)) == 1  # no second request
    assert HELD == ["10", "11"]
    assert standin.ephemerals == []


async def test_a_channel_grant_covers_a_new_thread_and_a_thread_grant_does_not(
    db_url, launch, standin
):
    app: Running = await launch(db_url, AGENT, _model())
    await granted(app, "U0ALICE", "hold order 20")  # this thread only
    await eventually(lambda: "20" in HELD, within=30)
    _, request = await asked(app, "U0ALICE", "hold order 21")  # a new thread: asked
    assert ALLOW_AGAIN in elements(request)
    assert "21" not in HELD

    await granted(app, "U0ALICE", "hold order 22", scope="This channel", channel=OTHER)
    await eventually(lambda: "22" in HELD, within=30)
    await app.slack.mention("U0ALICE", "hold order 23", channel=OTHER)  # a new thread
    await eventually(lambda: "23" in HELD, within=30)
    card = "allowed again by <@U0ALICE> (standing grant)"
    await eventually(lambda: cards(standin, OTHER).get("c_hold_23") == ("complete", card))
    assert len(requests(standin, OTHER)) == 1
    assert "21" not in HELD  # still waiting for its answer in the first channel


async def test_another_person_in_the_thread_is_still_asked(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    thread, _ = await granted(app, "U0ALICE", "hold order 30")
    await eventually(lambda: "30" in HELD, within=30)
    await eventually(lambda: idle(standin, CHANNEL))
    _, bobs = await asked(app, "U0BOB", "hold order 31", thread=thread)
    assert "Only <@U0BOB> can answer" in json.dumps(bobs.blocks)
    assert ALLOW_AGAIN in elements(bobs)
    assert HELD == ["30"]


# who may grant, and what is refused ----------------------------------------------------------


async def test_someone_who_may_not_answer_cannot_open_the_modal(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "hold order 40")
    button = elements(request)[ALLOW_AGAIN]
    await app.slack.click(
        "U0MALLORY", button, channel=CHANNEL, message_ts=request.ts, thread_ts=thread
    )
    await eventually(lambda: standin.ephemerals)
    assert "can't answer" in standin.ephemerals[0]["text"]
    assert standin.ephemerals[0]["user"] == "U0MALLORY"
    assert standin.modals == []
    assert ALLOW_AGAIN in elements(request)
    assert (await proposal(app, thread, request)).status == ConfirmationStatus.PENDING
    assert await standing_grants(app.bot.runtime.store, None, now=app.bot.runtime.clock()) == []


async def test_a_span_past_the_limit_is_refused_in_the_modal_and_nothing_applied(
    db_url, launch, standin
):
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "hold order 50")
    modal = await open_modal(app, "U0ALICE", request, thread)
    forged = {"text": {"type": "plain_text", "text": "2 days"}, "value": str(2 * DAY)}
    response = await choose(app, "U0ALICE", modal, span_option=forged)
    assert response.status_code == 200
    refusal = response.json()
    assert refusal["response_action"] == "errors"
    assert "at most 1 day" in refusal["errors"][SPAN_BLOCK]

    assert (await proposal(app, thread, request)).status == ConfirmationStatus.PENDING
    assert ALLOW_AGAIN in elements(request)
    assert HELD == []
    # the same modal, with a span the tool allows, goes through
    assert (await choose(app, "U0ALICE", modal, span="8 hours")).status_code == 200
    await eventually(lambda: "allowed it again in this thread for 8 hours" in request.text)
    await eventually(lambda: HELD == ["50"], within=30)


# the Home tab --------------------------------------------------------------------------------


async def test_home_lists_the_grant_to_who_gave_it_and_whom_it_covers(db_url, launch, standin):
    """A manager approves alice's refund and allows it again: both see it, bob does not, and
    bob's Revoke (a forged view) is refused."""
    app: Running = await launch(db_url, AGENT, _model())
    for user in (BOSS, "U0ALICE", "U0BOB"):
        await app.slack.open_home(user)
    await eventually(lambda: all(u in standin.home_views for u in (BOSS, "U0ALICE", "U0BOB")))
    thread, request = await asked(app, "U0ALICE", "refund order 60")
    modal = await open_modal(app, BOSS, request, thread)
    await choose(app, BOSS, modal, "This channel", "8 hours")
    await eventually(lambda: f"Approved by <@{BOSS}> and allowed it again" in request.text)

    line = f"small_refund* in <#{CHANNEL}> · for <@U0ALICE> · granted by <@{BOSS}> · until <!date^"
    await eventually(lambda: line in home(standin, BOSS))
    await eventually(lambda: line in home(standin, "U0ALICE"))
    await app.slack.open_home("U0BOB")
    await eventually(lambda: NO_GRANTS in home(standin, "U0BOB"))
    assert "small_refund" not in home(standin, "U0BOB")

    [revoke] = revoke_buttons(standin, BOSS)
    standin.home_views["U0BOB"].body["blocks"].append(
        {"type": "section", "text": {"type": "mrkdwn", "text": "x"}, "accessory": revoke}
    )
    await app.slack.click_in_home("U0BOB", revoke)
    # told in his tab (a later refresh may already have replaced that view: the call is kept)
    await eventually(lambda: told(standin, "U0BOB", "You can't revoke that grant"))
    live = await standing_grants(app.bot.runtime.store, None, now=app.bot.runtime.clock())
    assert [g.granted_by for g in live] == [BOSS]


async def test_revoking_from_home_makes_the_next_call_ask_again(db_url, launch, standin):
    app: Running = await launch(db_url, AGENT, _model())
    await app.slack.open_home("U0ALICE")
    thread, _ = await granted(app, "U0ALICE", "hold order 70")
    await eventually(lambda: "70" in HELD, within=30)
    await eventually(lambda: revoke_buttons(standin, "U0ALICE"))
    link = f"https://demo.slack.com/archives/{CHANNEL}/p{thread.replace('.', '')}"
    assert f"*place_hold* in <{link}|a thread> in <#{CHANNEL}>" in home(standin, "U0ALICE")
    assert "granted by <@U0ALICE>" in home(standin, "U0ALICE")

    [revoke] = revoke_buttons(standin, "U0ALICE")
    assert (await app.slack.click_in_home("U0ALICE", revoke)).status_code == 200
    await eventually(lambda: NO_GRANTS in home(standin, "U0ALICE"))
    assert await standing_grants(app.bot.runtime.store, None, now=app.bot.runtime.clock()) == []
    await eventually(lambda: idle(standin, CHANNEL))

    _, again = await asked(app, "U0ALICE", "hold order 71", thread=thread)
    assert ALLOW_AGAIN in elements(again)
    assert len(requests(standin)) == 2
    assert "71" not in HELD


async def test_the_home_tab_offers_approve_and_allow_again_and_its_modal_grants(
    db_url, launch, standin
):
    """The Home tab's inbox offers the third button as the thread does; its modal approves and
    grants alike."""
    app: Running = await launch(db_url, AGENT, _model())
    thread, request = await asked(app, "U0ALICE", "hold order 30")
    pending = await proposal(app, thread, request)
    assert (await app.slack.open_home("U0ALICE")).status_code == 200

    def listed() -> dict[str, dict[str, Any]]:
        view = standin.home_views.get("U0ALICE")
        blocks = view.body["blocks"] if view is not None else []
        return {
            e["action_id"]: e
            for b in blocks
            if b["type"] == "actions" and str(b.get("block_id", "")).startswith("approval:")
            for e in b["elements"]
        }

    await eventually(lambda: ALLOW_AGAIN in listed())
    assert set(listed()) == {APPROVE, DENY, ALLOW_AGAIN}
    assert ApprovalRef.decode(listed()[ALLOW_AGAIN]["value"]).ident == pending.confirmation_id
    seen = len(standin.modals)
    clicked = await app.slack.click_in_home("U0ALICE", listed()[ALLOW_AGAIN])
    assert clicked.status_code == 200
    await eventually(lambda: len(standin.modals) > seen)
    assert (await choose(app, "U0ALICE", standin.modals[-1])).status_code == 200
    await eventually(lambda: HELD == ["30"], within=30)
    said = "Approved by <@U0ALICE> and allowed it again in this thread for 1 day"
    await eventually(lambda: said in request.text, within=30)
