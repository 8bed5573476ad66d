"""Typed turn events. All but `message.delta` are durable: written to the session's event log in
the same transaction as the step that caused them, so a renderer that restarts can catch up.

`seq` is the event's position in the session's log; it is 0 until the store assigns it, and live
deltas keep 0 (they are never stored).
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent._messages import JsonValue, ToolCall, Usage
from agent._requests import ConfirmationRequest, InputRequest


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    session: str
    turn_id: str
    seq: int = 0


class TurnStarted(_Event):
    type: Literal["turn.started"] = "turn.started"
    text: str
    source: str | None = None


class MessageDelta(_Event):
    """Live only. `restart` tells a renderer to discard the partial text: the call was retried.

    `after` is set on a delta relayed from another process (`EventHub.deliver`): the seq of the
    newest durable event of the session that process emitted before it, which an observer here
    may never have seen. 0 on a delta emitted in this process, whose observers saw the events
    before it in order."""

    type: Literal["message.delta"] = "message.delta"
    text: str
    restart: bool = False
    after: int = 0


class MessageCompleted(_Event):
    type: Literal["message.completed"] = "message.completed"
    index: int
    text: str


class ActionRequested(_Event):
    type: Literal["action.requested"] = "action.requested"
    call: ToolCall


class ActionCompleted(_Event):
    type: Literal["action.completed"] = "action.completed"
    call_id: str
    name: str
    result: JsonValue = None
    error: str | None = None


class InputRequested(_Event):
    type: Literal["input.requested"] = "input.requested"
    request: InputRequest


class ConfirmationRequested(_Event):
    type: Literal["confirmation.requested"] = "confirmation.requested"
    confirmation: ConfirmationRequest


class ConfirmationResolved(_Event):
    type: Literal["confirmation.resolved"] = "confirmation.resolved"
    confirmation_id: str
    accepted: bool
    by: str | None = None


class TurnCompleted(_Event):
    type: Literal["turn.completed"] = "turn.completed"
    text: str
    usage: Usage = Usage()


class TurnFailed(_Event):
    type: Literal["turn.failed"] = "turn.failed"
    error: str


class TurnCancelled(_Event):
    type: Literal["turn.cancelled"] = "turn.cancelled"
    reason: str


TurnEvent = Annotated[
    TurnStarted
    | MessageDelta
    | MessageCompleted
    | ActionRequested
    | ActionCompleted
    | InputRequested
    | ConfirmationRequested
    | ConfirmationResolved
    | TurnCompleted
    | TurnFailed
    | TurnCancelled,
    Field(discriminator="type"),
]

TERMINAL_EVENT_TYPES = frozenset(
    {"turn.completed", "turn.failed", "turn.cancelled", "input.requested"}
)

_event_adapter: TypeAdapter[TurnEvent] = TypeAdapter(TurnEvent)


def event_to_json(event: TurnEvent) -> str:
    return event.model_dump_json(exclude={"seq", "session"})


def event_from_json(raw: str | bytes, *, session: str, seq: int) -> TurnEvent:
    obj = json.loads(raw)
    obj["session"] = session
    obj["seq"] = seq
    return _event_adapter.validate_python(obj)
