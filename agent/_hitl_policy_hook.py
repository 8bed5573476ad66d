"""The shape of the agent's `approve_automatically` hook (what it is shown, what it returns),
apart from the step that asks it (`agent._hitl_automatic`), so an `Agent` can name its type
without importing the turn machinery."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PolicyApproval(BaseModel):
    """What `approve_automatically` returns to approve a call: the rule that did (`policy`, a
    short name shown as "approved by policy <name>") and why, as the model and the audit read
    it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")
    reason: str = Field(min_length=1)


@dataclass(frozen=True, kw_only=True)
class ProposedWrite:
    """What the hook is shown: the exact call, whose turn it is, and who it is for. `asked_by`
    is the attested speaker (None for a scheduled or proactive turn, whose `trigger_by` says
    what started it); `workspace` is the turn's (`team`, `enterprise`).

    The hook is also shown a yes-or-no request a tool asks with `ctx.request_input` (no schema,
    or a boolean one; never a `Quorum`'s): then `kind` is "input", `input_id` and `prompt` are
    the request's, `arguments` are still the call's, and an approval answers it True. A rule
    that approves by tool name alone approves that tool's requests too: check `kind`."""

    session: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    asked_by: str | None
    trigger_by: str | None
    workspace: dict[str, str] = field(default_factory=dict)
    input_id: str | None = None
    """The request's id, for a yes-or-no request (`kind` "input"); None for a proposed write."""
    prompt: str | None = None
    """What the request asks (`kind` "input")."""

    @property
    def kind(self) -> Literal["write", "input"]:
        return "write" if self.input_id is None else "input"


ApproveAutomatically = Callable[[ProposedWrite], Awaitable[PolicyApproval | None]]
