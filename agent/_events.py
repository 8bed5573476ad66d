"""Typed turn events. All but `message.delta` and `progress.updated` are durable: written to the
session's event log in the same transaction as the step that caused them, so a renderer that
restarts can catch up.

`seq` is the event's position in the session's log; it is 0 until the store assigns it, and live
deltas keep 0 (they are never stored).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from agent._hitl_answerers import Answerer
from agent._hitl_requests import ConfirmationRequest, InputRequest
from agent._messages import JsonValue, ToolCall, Usage


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


MAX_PROGRESS = 2000
"""Characters of a step's progress one `progress.updated` carries at most (its newest ones)."""


class ProgressUpdated(_Event):
    """Live only, never stored: what the model has shown of its progress so far in the model
    step that will commit as message `index` (its summarized thinking, where newer models put
    what they say between tool calls), the newest `MAX_PROGRESS` characters of it. Never the
    model's words: no part of the step's text, the turn's result or any durable event.

    Each one replaces the last (the whole progress so far, not a piece of it), so a surface that
    misses one (a relay's pub/sub drops it) shows the next one whole. `after`: as on
    `MessageDelta`, set on one relayed from another process."""

    type: Literal["progress.updated"] = "progress.updated"
    index: int
    text: str
    after: int = 0


class MessageCompleted(_Event):
    type: Literal["message.completed"] = "message.completed"
    index: int
    text: str


class ActionRequested(_Event):
    type: Literal["action.requested"] = "action.requested"
    call: ToolCall


def _unless_true(value: object) -> bool:
    return value is not True


class ActionCompleted(_Event):
    type: Literal["action.completed"] = "action.completed"
    call_id: str
    name: str
    result: JsonValue = None
    error: str | None = None
    cancel_requested: bool = Field(default=False, exclude_if=_unless_true)
    """The turn had been asked to stop by the time the call returned: what it returned may be
    cut short by that (a long tool watching `ctx.cancellation`), so a surface need not show it
    as done. Only stored when true."""


class InputRequested(_Event):
    type: Literal["input.requested"] = "input.requested"
    request: InputRequest


def _unless_none(value: object) -> bool:
    return value is None


class InputResolved(_Event):
    """A park ended: a person answered it, it expired (its timer fired), or the turn was
    stopped. Logged in the transaction that ends the park, so a renderer can take the
    request's buttons away whatever process ended it. `by` is who answered or stopped it (None
    for an expiry, or host code answering without naming anyone); `reason` what they said."""

    type: Literal["input.resolved"] = "input.resolved"
    input_id: str
    outcome: Literal["answered", "expired", "cancelled"]
    by: str | None = None
    reason: str | None = Field(default=None, exclude_if=_unless_none)
    approved_by: list[str] | None = Field(default=None, exclude_if=_unless_none)
    """For a request that needed several approvals (`Quorum`): who approved, in vote order
    (`by` is the voter who decided it). Left out otherwise."""


class ConfirmationRequested(_Event):
    type: Literal["confirmation.requested"] = "confirmation.requested"
    confirmation: ConfirmationRequest


class ConfirmationResolved(_Event):
    """A proposed write was answered (`accepted` or `denied`) or nobody answered in time
    (`expired`, with `accepted` False and no `by`). Rows written before `outcome` existed read
    it from `accepted`."""

    type: Literal["confirmation.resolved"] = "confirmation.resolved"
    confirmation_id: str
    accepted: bool
    by: str | None = None
    outcome: Literal["accepted", "denied", "expired"]
    reason: str | None = Field(default=None, exclude_if=_unless_none)
    approved_by: list[str] | None = Field(default=None, exclude_if=_unless_none)
    """As for `InputResolved`: a quorum's approvers, in vote order."""
    arguments: dict[str, JsonValue] | None = Field(default=None, exclude_if=_unless_none)
    """The call as the approver edited it, which is what runs; None: as proposed."""
    changes: dict[str, JsonValue] | None = Field(default=None, exclude_if=_unless_none)
    """What the edit changed: `{argument: {"from": proposed, "to": approved}}`."""

    @model_validator(mode="before")
    @classmethod
    def _outcome_from_accepted(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("outcome") is None:
            return {**data, "outcome": "accepted" if data.get("accepted") else "denied"}
        return data


class ApprovalVoted(_Event):
    """One person's vote on a request that needs several (`Quorum`), logged with the vote; the
    request is still waiting (its `input.resolved` / `confirmation.resolved` follows once the
    votes decide it). `kind`: `input` (a park; `request_id` is the input id) or `confirmation`
    (`request_id` is the confirmation id)."""

    type: Literal["approval.voted"] = "approval.voted"
    kind: Literal["input", "confirmation"]
    request_id: str
    by: str
    approve: bool
    reason: str | None = Field(default=None, exclude_if=_unless_none)


class ApprovedByPolicy(_Event):
    """A proposed write (or a yes-or-no request, `input_id`) approved without asking anyone: by
    the agent's `approve_automatically` rule (`policy`, with its `reason`) or by a standing
    grant a person gave earlier; the call runs next in this turn. A write's confirmation row
    says the same (`by` "policy:<policy>" or "grant:<grant id>")."""

    type: Literal["approval.automatic"] = "approval.automatic"
    call_id: str
    tool: str
    confirmation_id: str | None = None
    """The write's confirmation row; None for a request answered by the rule (`input_id`)."""
    policy: str
    reason: str
    input_id: str | None = Field(default=None, exclude_if=_unless_none)
    """Set when the rule answered a yes-or-no `ctx.request_input` (True) instead of a write:
    nobody was asked, and the turn did not park."""
    grant_id: str | None = Field(default=None, exclude_if=_unless_none)
    granted_by: str | None = Field(default=None, exclude_if=_unless_none)
    """Set when a standing grant let the call through (`policy` is then "standing-grant"):
    which grant, and who granted it."""


class ApprovalReminded(_Event):
    """A request still unanswered after its `remind_after`: whoever may answer it is reminded,
    once (logged with the claim of its timer, whichever process fired it). `kind` and
    `request_id` as in `approval.voted`; `turn_id` is the asking turn; `waited`: seconds since
    the request was made."""

    type: Literal["approval.reminded"] = "approval.reminded"
    kind: Literal["input", "confirmation"]
    request_id: str
    waited: float
    answerers: Answerer | None = None
    """Who may answer it (the request's own answerers; escalations fired earlier add theirs,
    listed in their own events)."""


class ApprovalEscalated(_Event):
    """A request still unanswered after its `escalate_after`: from now on `answerers` may answer
    it too (their buttons are posted to them), once, as `approval.reminded`."""

    type: Literal["approval.escalated"] = "approval.escalated"
    kind: Literal["input", "confirmation"]
    request_id: str
    waited: float
    answerers: Answerer


class TurnCompleted(_Event):
    type: Literal["turn.completed"] = "turn.completed"
    text: str
    usage: Usage = Usage()
    declined: str | None = Field(default=None, exclude_if=_unless_none)
    """Set when the model refused (`agent._stops`): the line a surface shows under what the
    model said, so a cut-off answer never reads as a whole one. Left out of the stored event
    otherwise, so events stored before it read and write the same."""


class TurnFailed(_Event):
    type: Literal["turn.failed"] = "turn.failed"
    error: str


class TurnCancelled(_Event):
    type: Literal["turn.cancelled"] = "turn.cancelled"
    reason: str
    by: str | None = Field(default=None, exclude_if=_unless_none)
    """Who stopped the turn (`AgentSession.stop(by=...)`), so a surface can say so; None when
    nobody was named (a replace, a reset, host code)."""


TurnEvent = Annotated[
    TurnStarted
    | MessageDelta
    | ProgressUpdated
    | MessageCompleted
    | ActionRequested
    | ActionCompleted
    | InputRequested
    | InputResolved
    | ConfirmationRequested
    | ConfirmationResolved
    | ApprovalVoted
    | ApprovedByPolicy
    | ApprovalReminded
    | ApprovalEscalated
    | TurnCompleted
    | TurnFailed
    | TurnCancelled,
    Field(discriminator="type"),
]

_event_adapter: TypeAdapter[TurnEvent] = TypeAdapter(TurnEvent)


def event_to_json(event: TurnEvent) -> str:
    return event.model_dump_json(exclude={"seq", "session"})


def event_from_json(raw: str | bytes, *, session: str, seq: int) -> TurnEvent:
    obj = json.loads(raw)
    obj["session"] = session
    obj["seq"] = seq
    return _event_adapter.validate_python(obj)
