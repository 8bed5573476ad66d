"""What a person is asked: a parked turn's input request, a proposed write's confirmation.

Both used to be plain dicts, and are still stored as exactly those dicts (in the event log, the
session's suspend checkpoint, the turn's result), so these models parse what any version wrote
and dump the same JSON back. They are read where the engine reads the store; past that point
the engine, the bot and a host see typed fields. Like pydantic-ai's deferred tool requests, each
is keyed by the tool call that made it, so a surface can tie the question to the call it shows.

A leaf module, so events and records can hold them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent._hitl_answerers import Answerer
from agent._messages import JsonValue


def _unless_none(value: object) -> bool:
    return value is None


class InputRequest(BaseModel):
    """A turn parked on `ctx.request_input`: what to ask, who may answer, and what binds an
    answer to it (`digest`, over turn, id, prompt, schema and answerers).

    `json_schema` is `schema` in the JSON and in the constructor (`InputRequest(schema=...)`):
    the stored key, which as an attribute would shadow pydantic's own `BaseModel.schema`."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    id: str
    """The input id, unique within the turn: the answer is stored under `input:<turn>:<id>`."""
    prompt: str
    json_schema: dict[str, JsonValue] | None = Field(default=None, alias="schema")
    """The JSON schema an answer must fit; None takes any JSON."""
    answerers: Answerer | None = None
    """None: no restriction (a turn host code started, which the host answers itself)."""
    turn_id: str
    call_id: str
    tool: str
    digest: str
    expires_at: float | None = Field(default=None, exclude_if=_unless_none)
    """When the request expires if nobody answers (its durable timer), None: never. Not part
    of the digest, and left out of the JSON when None, so requests stored before it read and
    write the same."""

    def to_json(self) -> dict[str, JsonValue]:
        """The stored shape (the dict the checkpoint, the event and the turn result hold)."""
        return self.model_dump(mode="json")


class ConfirmationRequest(BaseModel):
    """A proposed write waiting for a person, as `confirmation.requested` announces it.

    `details` is set only for a `confirmation="capability"` tool (what it showed with its own
    prompt). The event is emitted as the proposal is recorded, so its `status` is always
    `pending`; the answer comes as `confirmation.resolved`, and `session.confirmations()` has
    the record's current status."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """The confirmation id `session.confirm` takes (`<turn id>:<call id>`)."""
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, JsonValue]
    prompt: str
    answerers: Answerer | None = None
    details: dict[str, JsonValue] | None = None
    status: Literal["pending"] = "pending"
    expires_at: float | None = Field(default=None, exclude_if=_unless_none)
    """When the proposal expires if nobody answers; None: never (left out of the JSON)."""
    grantable_for: float | None = Field(default=None, exclude_if=_unless_none)
    """Seconds for which whoever approves may allow the tool's later calls again (a standing
    grant; `@tool(grantable_for=)`), so a surface can offer it; None: not offered."""
    editable: list[str] | None = Field(default=None, exclude_if=_unless_none)
    """The arguments whoever approves may change first (`@tool(editable=)`), so a surface can
    offer "Edit and approve"; None: not offered."""


def parked_request(checkpoint: JsonValue) -> InputRequest | None:
    """The request in a suspended session's checkpoint (`SessionRecord.pending`), or None when
    the checkpoint holds none; the checkpoint's other keys are the engine's to replay with."""
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("request"), dict):
        return None
    return InputRequest.model_validate(checkpoint["request"])


def parked_requests(checkpoint: JsonValue) -> list[InputRequest]:
    """Every request a suspended session's checkpoint waits on, in call order: the calls of one
    batch that each asked park together (`requests`, when more than one waits), else the one
    `request`; `[]` when the checkpoint holds none."""
    if not isinstance(checkpoint, dict):
        return []
    several = checkpoint.get("requests")
    if isinstance(several, list):
        return [InputRequest.model_validate(stored) for stored in several]
    one = parked_request(checkpoint)
    return [one] if one is not None else []


def with_requests(checkpoint: dict[str, JsonValue], requests: list[InputRequest]) -> JsonValue:
    """`checkpoint` waiting on `requests` (call order), or None when none is left. One request
    is stored exactly as a park always stored it (`request`, `call_id`); several add `requests`
    with each, `request` and `call_id` naming the first, so a reader of one finds one."""
    if not requests:
        return None
    kept = {k: v for k, v in checkpoint.items() if k != "requests"}
    kept["request"] = requests[0].to_json()
    kept["call_id"] = requests[0].call_id
    if len(requests) > 1:
        kept["requests"] = [request.to_json() for request in requests]
    return kept


def without_request(checkpoint: JsonValue, answered: InputRequest) -> JsonValue:
    """The checkpoint once `answered` no longer waits: the others still do, or None (the turn
    is whole again and resumes)."""
    if not isinstance(checkpoint, dict):
        return None
    left = [
        request
        for request in parked_requests(checkpoint)
        if (request.turn_id, request.id) != (answered.turn_id, answered.id)
    ]
    return with_requests(checkpoint, left)
