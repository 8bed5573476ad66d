"""Agents and scripts the bot tests run (the scripted model; no network)."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from sqlalchemy import text

from agent import (
    Agent,
    AnswerRequest,
    RequestExpiredError,
    ScriptedModel,
    ScriptedReply,
    SuggestedPrompt,
    ToolCall,
    ToolContext,
    TriggerMessage,
    tool,
)

BOSS = "U0BOSS"


@tool
async def lookup_order(order_id: str) -> dict[str, Any]:
    """Read an order."""
    return {"order_id": order_id, "item": "mug"}


@tool
async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> dict[str, Any]:
    """Refund once the requester approves."""
    approved = await ctx.request_input(
        id="approve-refund",
        prompt=f"Approve a ${amount:.2f} refund on order {order_id}?",
        schema={"type": "boolean"},
    )
    return {"refunded": approved is True}


@tool
async def escalate(reason: str, ctx: ToolContext) -> dict[str, Any]:
    """Ask a manager (a policy answerer)."""
    approved = await ctx.request_input(
        id="manager-ok",
        prompt=f"Manager approval needed: {reason}",
        schema={"type": "boolean"},
        answerers={"policy": "managers", "scope": "refunds"},
    )
    return {"approved": approved is True}


async def managers_only(request: AnswerRequest) -> bool:
    principal = request["principal"]
    return (
        request["policy"] == "managers"
        and principal.get("user") == BOSS
        and principal.get("team") == "T0DEMO"
    )


GATE: dict[str, asyncio.Event] = {}


@tool
async def wait_for_gate(name: str) -> dict[str, Any]:
    """Waits until the test opens the gate (a long-running remote call)."""
    await GATE.setdefault(name, asyncio.Event()).wait()
    return {"opened": name}


async def _until_gate_or_stop(name: str, ctx: ToolContext) -> dict[str, Any]:
    gate = asyncio.ensure_future(GATE.setdefault(name, asyncio.Event()).wait())
    stop = asyncio.ensure_future(ctx.cancellation.wait())
    done, pending = await asyncio.wait({gate, stop}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return {"stopped": stop in done}


@tool
async def long_task(name: str, ctx: ToolContext) -> dict[str, Any]:
    """Works until the test opens the gate, or the turn is asked to stop (a remote tool that
    watches its cancellation, as a long one should)."""
    return await _until_gate_or_stop(name, ctx)


@tool(concurrency=1)
async def exclusive_task(name: str, ctx: ToolContext) -> dict[str, Any]:
    """`long_task` on something that takes one caller at a time: its calls never overlap
    (`concurrency=1`), so a batch's second call waits for the first to end."""
    return await _until_gate_or_stop(name, ctx)


@tool
async def timed_refund(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """A refund whose approval waits an hour at most."""
    try:
        approved = await ctx.request_input(
            id="approve-refund",
            prompt=f"Approve a refund on order {order_id}? (an hour to answer)",
            schema={"type": "boolean"},
            expires_after=3600,
        )
    except RequestExpiredError:
        return {"refunded": False, "why": "nobody approved it in time"}
    return {"refunded": approved is True}


HOLDS: list[dict[str, Any]] = []
"""Every hold the provider placed: a confirmed write must land here exactly once."""
EFFECTS_FILE = "BOT_TEST_EFFECTS_FILE"
"""Where a bot in another process records each hold it places (one line per call, fsynced), so
a test that SIGKILLs it can count the calls the provider saw."""


def _record_effect(key: str) -> None:
    path = os.environ.get(EFFECTS_FILE)
    if not path:
        return
    with open(path, "a", encoding="utf-8") as log:
        log.write(key + "\n")
        log.flush()
        os.fsync(log.fileno())


@tool(effect="write", confirmation="required", expires_after=3600)
async def timed_hold(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Put an order on hold, if someone confirms within the hour."""

    async def hold(authority: Any) -> dict[str, Any]:
        return {"held": order_id}

    effect = await ctx.run_effect(f"timed-hold:{order_id}", hold)
    return dict(effect.value)


@tool(effect="write", confirmation="required")
async def place_hold(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Put an order on hold (a write the requester confirms)."""

    async def hold(authority: Any) -> dict[str, Any]:
        HOLDS.append({"order_id": order_id, "key": authority.idempotency_key})
        await asyncio.to_thread(_record_effect, f"{ctx.session} {authority.idempotency_key}")
        return {"held": order_id}

    effect = await ctx.run_effect(f"hold:{order_id}", hold, payload={"order_id": order_id})
    return dict(effect.value)


SHIPPING: dict[str, int] = {"42": 7}
"""What shipping order 42 costs now, in dollars; a test may move it while a person reads."""
SHIPMENTS: list[dict[str, Any]] = []
"""Every shipment the provider booked."""


@tool(effect="write", confirmation="capability")
async def ship_order(order_id: str, ctx: ToolContext) -> Any:
    """Book shipping at today's price (the requester approves the price shown)."""
    details = {"order": order_id, "price": SHIPPING[order_id]}
    if not ctx.confirmed(details):
        return ctx.needs_confirmation(prompt=f"Ship order {order_id}?", details=details)

    async def book(authority: Any) -> dict[str, Any]:
        SHIPMENTS.append({**details, "key": authority.idempotency_key})
        return {"shipped": order_id}

    effect = await ctx.run_effect(f"ship:{order_id}", book, payload=details)
    return dict(effect.value)


AGENT = Agent(
    name="test-ops",
    instructions="Help with orders.",
    tools=[
        lookup_order,
        issue_refund,
        escalate,
        wait_for_gate,
        long_task,
        exclusive_task,
        timed_refund,
        timed_hold,
        place_hold,
        ship_order,
    ],
    authorize_answer=managers_only,
)

SIMPLE = [ScriptedReply(text=["Hello ", "from the ", "agent."])]

REFUND = [
    ScriptedReply(
        text=["Looking ", "it up."],
        tool_calls=[
            ToolCall(id="c_lookup", name="lookup_order", input={"order_id": "42"}),
            ToolCall(id="c_refund", name="issue_refund", input={"order_id": "42", "amount": 18.5}),
        ],
    ),
    ScriptedReply(text=["Refund ", "done."]),
]

POLICY = [
    ScriptedReply(
        text="Asking a manager.",
        tool_calls=[ToolCall(id="c_esc", name="escalate", input={"reason": "big refund"})],
    ),
    ScriptedReply(text="The manager said yes."),
]

GATED = [
    ScriptedReply(
        text=["First part ", "of the answer."],
        tool_calls=[ToolCall(id="c_gate", name="wait_for_gate", input={"name": "slow"})],
    ),
    ScriptedReply(text=["Second part ", "after the long call."]),
]

LONG = [
    ScriptedReply(
        text=["First part ", "of the answer."],
        tool_calls=[ToolCall(id="c_long", name="long_task", input={"name": "long"})],
    ),
    ScriptedReply(text=["Second part ", "after the long call."]),
]
"""A turn in a long tool call that stops early when the turn is cancelled."""

LONG_BESIDE_OTHERS = [
    ScriptedReply(
        text=["First part ", "of the answer."],
        tool_calls=[
            ToolCall(id="c_long", name="long_task", input={"name": "long"}),
            ToolCall(id="c_long_2", name="long_task", input={"name": "long-2"}),
            ToolCall(id="c_then", name="lookup_order", input={"order_id": "42"}),
        ],
    ),
    ScriptedReply(text=["Second part ", "after the long call."]),
]
"""`LONG` with two more calls in its batch, all three run side by side: a second long call (both
are running when a Stop comes) and a lookup that has finished by then."""

EXCLUSIVE_PAIR = [
    ScriptedReply(
        text=["First part ", "of the answer."],
        tool_calls=[
            ToolCall(id="c_long", name="exclusive_task", input={"name": "long"}),
            ToolCall(id="c_then", name="exclusive_task", input={"name": "then"}),
        ],
    ),
    ScriptedReply(text=["Second part ", "after the long call."]),
]
"""Two calls of a tool whose calls never overlap (`exclusive_task`, `concurrency=1`): the second
waits for the first, so a Stop during the first leaves it unrun."""

TIMED = [
    ScriptedReply(
        text="Asking for approval.",
        tool_calls=[ToolCall(id="c_timed", name="timed_refund", input={"order_id": "42"})],
    ),
    ScriptedReply(text="Nobody approved the refund in time."),
]


def timed_hold_reply(request: Any, step: int) -> ScriptedReply:
    """Proposes a timed hold; the turn the expiry queues says so."""
    opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
    if isinstance(opening, TriggerMessage):
        return ScriptedReply(text="The hold expired unconfirmed.")
    if step == 0:
        return ScriptedReply(
            text="Proposing a hold.",
            tool_calls=[ToolCall(id="c_th", name="timed_hold", input={"order_id": "42"})],
        )
    return ScriptedReply(text="The hold waits for your confirmation.")


LOOKUP = [
    ScriptedReply(
        text=["Looking ", "it up."],
        tool_calls=[ToolCall(id="c_lookup", name="lookup_order", input={"order_id": "42"})],
    ),
    ScriptedReply(text=["Order 42 ", "is a mug."]),
]
"""A turn of three steps (model, tool, model) that asks nobody anything: the throughput unit."""


def model(script: list[ScriptedReply], **kwargs: Any) -> ScriptedModel:
    return ScriptedModel(script, **kwargs)


def hold_reply(request: Any, step: int) -> ScriptedReply:
    """Proposes a hold on order 42; the turn acting on the answer reports it."""
    opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
    if isinstance(opening, TriggerMessage):
        return ScriptedReply(text="Hold placed.")
    if step == 0:
        return ScriptedReply(
            text="Proposing a hold.",
            tool_calls=[ToolCall(id="c_hold", name="place_hold", input={"order_id": "42"})],
        )
    return ScriptedReply(text="The hold waits for your confirmation.")


def hold_model() -> ScriptedModel:
    return ScriptedModel(responder=hold_reply)


def ship_reply(request: Any, step: int) -> ScriptedReply:
    """Asks to ship order 42; the turn acting on the answer repeats what the tool returned."""
    opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
    last = request.messages[-1]
    if not isinstance(opening, TriggerMessage) and step == 0:
        return ScriptedReply(
            text="Pricing the shipment.",
            tool_calls=[ToolCall(id="c_ship", name="ship_order", input={"order_id": "42"})],
        )
    if isinstance(opening, TriggerMessage) and last.role == "tool":
        status = last.result.get("status") or f"shipped {last.result.get('shipped')}"
        return ScriptedReply(text=f"Shipping: {status}.")
    return ScriptedReply(text="The shipment waits for your approval.")


def ship_model() -> ScriptedModel:
    return ScriptedModel(responder=ship_reply)


def soak_model() -> ScriptedModel:
    """Both kinds of approval, chosen by the session's first message: "refund ..." parks for the
    requester (REFUND), "hold ..." proposes a write the requester confirms (its effect is
    counted)."""

    def respond(request: Any, step: int) -> ScriptedReply:
        first = next(m for m in request.messages if m.role in ("user", "trigger"))
        if "hold" in first.text:
            return hold_reply(request, step)
        return REFUND[step]

    return ScriptedModel(responder=respond)


NOTES_TABLE = "chaos_notes"
"""Where `note_order` writes, one row per call; a test creates it (`NOTES_DDL`) and counts."""
NOTES_DDL = (
    f"CREATE TABLE IF NOT EXISTS {NOTES_TABLE} (id BIGSERIAL PRIMARY KEY, session TEXT NOT NULL, "
    "turn_id TEXT NOT NULL, order_id TEXT NOT NULL)"
)


@tool
def note_order(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Write a note on an order (a local write: it commits with the step, or not at all)."""
    ctx.store.unwrap().execute(
        text(
            f"INSERT INTO {NOTES_TABLE} (session, turn_id, order_id) "
            "VALUES (:session, :turn_id, :order_id)"
        ),
        {"session": ctx.session, "turn_id": ctx.turn_id, "order_id": order_id},
    )
    return {"noted": order_id}


CHAOS_AGENT = Agent(
    name="test-ops",
    instructions="Help with orders.",
    tools=[lookup_order, issue_refund, place_hold, note_order],
)
"""The many-workers agent: a park ("refund"), a confirmed write counted by its provider
("hold") and a local write counted in a table ("note")."""

NOTE = [
    ScriptedReply(
        text="Noting it.",
        tool_calls=[ToolCall(id="c_note", name="note_order", input={"order_id": "42"})],
    ),
    ScriptedReply(text="Noted."),
]

CHAOS_REPLIES = {
    "refund": ["Looking it up.", "Refund done."],
    "hold": ["Proposing a hold.", "The hold waits for your confirmation.", "Hold placed."],
    "note": ["Noting it.\n\nNoted."],
}
"""What the thread shows for each kind of turn: the words of each of its messages, in order (a
reply is one message until it stops for a person)."""


def chaos_model() -> ScriptedModel:
    """Each turn by its own opening message: "refund ..." parks for the requester, "hold ..."
    proposes a write the requester confirms (the confirmed call is a turn of its own), "note
    ..." writes a row in the step's transaction."""

    def respond(request: Any, step: int) -> ScriptedReply:
        opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
        if isinstance(opening, TriggerMessage) or "hold" in opening.text:
            return hold_reply(request, step)
        if "note" in opening.text:
            return NOTE[step]
        return REFUND[step]

    return ScriptedModel(responder=respond)


PROMPTS = (
    SuggestedPrompt(title="Look up an order", message="What is in order 42?"),
    SuggestedPrompt(title="Refund", message="Refund order 42, it arrived broken"),
    SuggestedPrompt(title="Hold", message="Put order 42 on hold"),
    SuggestedPrompt(title="Ship", message="Ship order 42"),
)
PROMPTED = Agent(
    name="test-ops",
    instructions="Help with orders.",
    tools=AGENT.tools,
    authorize_answer=managers_only,
    suggested_prompts=PROMPTS,
)
