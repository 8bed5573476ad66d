"""What the sandbox's offline model says: the demo's two stories for text that asks for them,
and an honest echo for anything else. No model is called; this picks a scripted reply per
model step from the turn's opening text and the tool results the transcript holds.

- A broken order or a refund ("order 7 arrived broken", "refund order 12"): look the order
  up, place a replacement and ask for the refund (the requester's Approve / Deny), then say
  what happened, quoting the reason of a Deny. The order is the first number in the text
  (42 when there is none); the demo's lookup answers the same mug for every order.
- Where a shipment is ("where is the replacement for order 42?", "track order 9"): ask the
  carrier, a tool that takes a minute unless the thread's Stop button ends it first.
- Anything else: the text echoed back, with the two phrasings above to try.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from agent import Message, ScriptedReply, ToolCall, ToolMessage
from agent.models import opening_text
from agent.seams import ModelRequest

REFUND_WORDS = ("refund", "broken", "damaged", "cracked")
TRACK_WORDS = ("where is", "track", "shipment", "carrier", "parcel")
DEFAULT_ORDER = "42"
PRICE = 18.5


def sandbox_reply(request: ModelRequest, step: int) -> ScriptedReply:
    """The scripted model's `responder`: the reply for model step `step` of this turn."""
    opening = opening_text(request.messages)
    lowered = opening.lower()
    order = _order_in(opening)
    if any(word in lowered for word in REFUND_WORDS):
        return _refund(step, order, request.messages)
    if any(word in lowered for word in TRACK_WORDS):
        return _track(step, order)
    return _echo(opening)


def _order_in(text: str) -> str:
    found = re.search(r"\d+", text)
    return found.group(0) if found else DEFAULT_ORDER


def _refund(step: int, order: str, messages: Sequence[Message]) -> ScriptedReply:
    if step == 0:
        return ScriptedReply(
            text=words(f"Let me look up order {order}."),
            tool_calls=[ToolCall(id="call_lookup", name="lookup_order", input={"order_id": order})],
        )
    if step == 1:
        return ScriptedReply(
            text=words("The mug arrived broken: I'll send a replacement and refund the order."),
            tool_calls=[
                ToolCall(
                    id="call_order", name="create_order", input={"item": "blue mug", "quantity": 1}
                ),
                ToolCall(
                    id="call_refund",
                    name="issue_refund",
                    input={"order_id": order, "amount": PRICE},
                ),
            ],
        )
    result = _last_result(messages, "issue_refund")
    if isinstance(result, dict) and result.get("refunded") is True:
        done = (
            f"Done: a replacement blue mug is on its way and ${PRICE:.2f} was refunded "
            f"on order {order}."
        )
        return ScriptedReply(text=words(done))
    reason = result.get("reason") if isinstance(result, dict) else None
    said = f" You said: “{reason}”." if isinstance(reason, str) and reason else ""
    return ScriptedReply(
        text=words(
            f"Understood: no refund on order {order}; the replacement mug still ships.{said}"
        )
    )


def _track(step: int, order: str) -> ScriptedReply:
    if step == 0:
        return ScriptedReply(
            text=words("Let me ask the carrier…"),
            tool_calls=[
                ToolCall(id="call_track", name="track_shipment", input={"order_id": order})
            ],
        )
    return ScriptedReply(
        text=words(f"The carrier says the replacement for order {order} is on its way.")
    )


def _echo(opening: str) -> ScriptedReply:
    shown = " ".join(opening.split())[:300] or "(nothing)"
    return ScriptedReply(
        text=words(
            f"You wrote: “{shown}”. I am the sandbox's scripted model, not a real one, so I "
            "only follow two scripts: try “order 42 arrived broken, can you sort it out?” "
            "(a refund that waits for an approval) or “where is the replacement for order "
            "42?” (a slow carrier lookup you can Stop)."
        )
    )


def _last_result(messages: Sequence[Message], tool: str) -> object:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and message.name == tool:
            return message.result
    return None


def words(text: str) -> list[str]:
    """Streamed a word or two at a time, so the reply visibly grows in the thread."""
    words = text.split(" ")
    chunks = [" ".join(words[i : i + 2]) + " " for i in range(0, len(words), 2)]
    chunks[-1] = chunks[-1].rstrip()
    return chunks
