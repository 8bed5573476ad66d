"""What the scripted model of `bot serve --offline` says to the example agent (examples/ops_agent):
a few stories that use its real tools, so an offline bot places orders, parks, proposes refunds
and pays them through the example's payments stand-in, exactly as it would with Claude choosing.
No model is called; each reply is picked from the turn's opening text and the results its tools
returned, so a turn resumed on another worker (or after a park) gets the same replies.

- "order 2 blue mugs" (order / buy / place, no order id): `create_order`, then its id.
- "look up ord_…": `lookup_order`, then what was paid and refunded.
- "refund ord_…, it arrived broken" (refund / broken / damaged with an id): `lookup_order`, then
  `ask_requester` (does the customer keep the item?), which parks the turn until the requester
  answers; on yes, `issue_refund` of what is left, proposed for approval; on no, nothing.
- The turn that follows an approval or a denial reports what the refund call did, or that it
  did not run.
- Anything else, or an agent without these tools: an honest echo saying what to try.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from agent import Message, ScriptedReply, ToolCall, ToolMessage, TriggerMessage, UserMessage
from agent.models import opening_text
from agent.seams import ModelRequest
from bot.cli.sandbox.script import words

TOOLS = frozenset({"create_order", "lookup_order", "ask_requester", "issue_refund"})
ORDER_ID = re.compile(r"\bord_[0-9a-f]{12}\b")
REFUND_WORDS = ("refund", "broken", "damaged", "cracked")
ORDER_WORDS = ("order", "buy", "place")
ANSWERED = re.compile(r"(approved|denied) the proposed call (\w+)|Nobody answered the proposed")
ITEM = "blue mug"
UNIT_PRICE = 18.5
KEEP_QUESTION = (
    "Order {order}: {item} x{quantity}, paid ${paid:.2f}. Does the customer keep it (no return "
    "label)? Approve: yes, they keep it. Deny: no, it comes back first."
)


def ops_reply(request: ModelRequest, step: int) -> ScriptedReply:
    """The scripted model's `responder`: the reply for model step `step` of this turn."""
    opening = opening_text(request.messages)
    if not {tool.name for tool in request.tools} >= TOOLS:
        return _say(
            f"You wrote: “{_shown(opening)}”. I am the offline scripted model (BOT_OFFLINE), "
            "not Claude, and I only know the example agent's tools (examples/ops_agent); this "
            "agent has others, so I can only echo."
        )
    results = _results(request.messages)
    if ANSWERED.search(opening):
        return _after_answer(opening, results)
    lowered = opening.lower()
    order = ORDER_ID.search(opening)
    if order and any(word in lowered for word in REFUND_WORDS):
        return _refund(step, order.group(0), results)
    if order:
        return _lookup(step, order.group(0), results)
    if any(word in lowered for word in ORDER_WORDS):
        return _place(step, opening, results)
    return _say(
        f"You wrote: “{_shown(opening)}”. I am the offline scripted model (BOT_OFFLINE), not "
        "Claude, so I follow three scripts: “order 2 blue mugs”, “look up ord_…” and “refund "
        "ord_…, it arrived broken” (which asks you a question, then proposes the refund)."
    )


def _place(step: int, opening: str, results: list[ToolMessage]) -> ScriptedReply:
    if step == 0:
        found = re.search(r"\b(\d{1,3})\b", opening)
        quantity = min(max(int(found.group(1)), 1), 100) if found else 1
        return _call(
            "Placing the order.",
            "create_order",
            {"item": ITEM, "quantity": quantity, "unit_price": UNIT_PRICE},
        )
    placed = _last(results, "create_order")
    if placed is None or placed.is_error or not isinstance(placed.result, dict):
        return _say(f"The order was not placed: {_error(placed)}.")
    order = placed.result
    return _say(
        f"Placed order {order['order_id']}: {order['quantity']} x {order['item']}, "
        f"${order['amount']:.2f}. To try a refund: “refund {order['order_id']}, it arrived "
        "broken”."
    )


def _lookup(step: int, order: str, results: list[ToolMessage]) -> ScriptedReply:
    if step == 0:
        return _call(f"Let me look up {order}.", "lookup_order", {"order_id": order})
    found = _found(results)
    if found is None:
        return _say(f"I could not look up {order}: {_error(_last(results, 'lookup_order'))}.")
    return _say(
        f"Order {order}: {found['quantity']} x {found['item']}, paid ${found['paid']:.2f}, "
        f"refunded ${found['refunded']:.2f} so far."
    )


def _refund(step: int, order: str, results: list[ToolMessage]) -> ScriptedReply:
    if step == 0:
        return _call(f"Let me look up {order} first.", "lookup_order", {"order_id": order})
    found = _found(results)
    if found is None:
        return _say(f"I could not look up {order}: {_error(_last(results, 'lookup_order'))}.")
    left = round(float(found["paid"]) - float(found["refunded"]), 2)
    if left <= 0:
        return _say(f"Nothing is left to refund on {order}: ${found['paid']:.2f} was refunded.")
    if step == 1:
        question = KEEP_QUESTION.format(
            order=order, item=found["item"], quantity=found["quantity"], paid=found["paid"]
        )
        return _call(
            "Before I propose a refund, one question for you.",
            "ask_requester",
            {"question": question},
        )
    asked = _last(results, "ask_requester")
    if asked is None or asked.is_error or not isinstance(asked.result, dict):
        return _say(f"I could not ask you, so I proposed nothing: {_error(asked)}.")
    if step == 2:
        if asked.result.get("answer") != "yes":
            note = asked.result.get("note")
            said = f" (you said: “{note}”)" if note else ""
            return _say(f"Understood{said}: no refund on {order} until the item is back.")
        return _call(
            f"Then I propose refunding the ${left:.2f} left on {order}.",
            "issue_refund",
            {"order_id": order, "amount": left},
        )
    return _say(f"The ${left:.2f} refund on {order} waits for approval; it runs only if approved.")


def _after_answer(opening: str, results: list[ToolMessage]) -> ScriptedReply:
    """The turn the engine starts once a proposed call is approved, denied or expired; an
    approved call has run by now and its result is this turn's."""
    ran = results[-1] if results else None
    if ran is None:
        return _say("Understood: the proposed call did not run, so nothing was done.")
    if ran.is_error or not isinstance(ran.result, dict):
        return _say(f"The {ran.name} call did not go through: {_error(ran)}.")
    if ran.name == "issue_refund":
        done = ran.result
        return _say(
            f"Refunded {done['refunded']} on {done['order_id']} (refund {done['refund_id']}, "
            "through the example's payments stand-in; no real money moved)."
        )
    return _say(f"Done: {ran.name} returned {ran.result}.")


def _results(messages: Sequence[Message]) -> list[ToolMessage]:
    """This turn's tool results, oldest first."""
    found: list[ToolMessage] = []
    for message in reversed(messages):
        if isinstance(message, UserMessage | TriggerMessage):
            break
        if isinstance(message, ToolMessage):
            found.append(message)
    return found[::-1]


def _last(results: list[ToolMessage], name: str) -> ToolMessage | None:
    return next((m for m in reversed(results) if m.name == name), None)


def _found(results: list[ToolMessage]) -> dict[str, Any] | None:
    looked = _last(results, "lookup_order")
    if looked is None or looked.is_error or not isinstance(looked.result, dict):
        return None
    return looked.result


def _error(message: ToolMessage | None) -> str:
    if message is None:
        return "the tool did not answer"
    result = message.result
    if isinstance(result, dict) and isinstance(result.get("error"), str):
        return str(result["error"])
    return str(result)


def _call(text: str, tool: str, arguments: dict[str, Any]) -> ScriptedReply:
    return ScriptedReply(
        text=words(text), tool_calls=[ToolCall(id=f"call_{tool}", name=tool, input=arguments)]
    )


def _say(text: str) -> ScriptedReply:
    return ScriptedReply(text=words(text))


def _shown(opening: str) -> str:
    return " ".join(opening.split())[:300] or "(nothing)"
