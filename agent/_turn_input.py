"""What opens a turn: the text, who said it (and whether a channel vouches for that), and why.

The raw transport payload rides along for the live run only; `model_dump` leaves it out, so it
never reaches a checkpoint.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agent._hitl_answerers import Answerer


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Speaker(_Frozen):
    id: str
    attested: bool = False
    """True only when the channel verified the identity (a signed Slack payload, say)."""
    name: str | None = None


class InboundEvent(_Frozen):
    source: str
    text: str
    user: Speaker | None = None
    context: dict[str, Any] = Field(default_factory=dict)
    """Surface addresses (team, channel, thread): what a renderer needs to reply."""
    raw: dict[str, Any] | None = Field(default=None, exclude=True)


class Trigger(_Frozen):
    """Why a turn with no inbound message runs: a schedule, a proactive post, a person's answer
    to a proposed write."""

    kind: str
    by: str
    answerers: Answerer | None = None
    """Who may answer what the turn asks. Nobody spoke, so there is no speaker to default to:
    a proactive turn that parks without answerers (here or in the call) is refused. Given as
    a typed answerer or its dict (`{"user": id}`); stored as that dict."""
    context: dict[str, Any] = Field(default_factory=dict)
    """The workspace the turn posts into (`team`, `enterprise`), which answers must come from."""


class ConfirmationAnswer(_Frozen):
    """Carried by the turn that acts on a person's answer to a proposed write."""

    confirmation_id: str
    accepted: bool
    tool: str
    call_id: str
    arguments: dict[str, Any]
    details: dict[str, Any] | None = None
    """What a `confirmation="capability"` tool showed and the person approved; the tool finds
    `ctx.confirmed(details)` True only for these (see `agent._hitl_capability_confirmation`)."""
    proposed_arguments: dict[str, Any] | None = None
    """The call as the model proposed it, when the person edited it before approving
    (`arguments` is then what they approved and what runs)."""


def speaker_key(team: str, user: str) -> str:
    """A person as `TurnInput.speaker_key` names them: a user id means one person only inside
    its workspace."""
    return f"{team}:{user}"


class TurnInput(_Frozen):
    text: str
    inbound: InboundEvent | None = None
    trigger: Trigger | None = None
    confirmation: ConfirmationAnswer | None = None

    @property
    def source(self) -> str | None:
        return self.inbound.source if self.inbound else None

    @property
    def speaker_key(self) -> str | None:
        """`<team>:<user>` for a message whose speaker the channel attests, in the workspace it
        came from: what stores index so a person's own recent turns can be listed
        (`Runtime.recent_turns`). None for anything else: an unattested speaker, a message
        with no workspace, a trigger (nobody spoke)."""
        inbound = self.inbound
        if inbound is None or inbound.user is None or not inbound.user.attested:
            return None
        team = inbound.context.get("team")
        return speaker_key(str(team), inbound.user.id) if team else None

    @classmethod
    def of(cls, value: str | TurnInput | InboundEvent) -> TurnInput:
        if isinstance(value, TurnInput):
            return value
        if isinstance(value, InboundEvent):
            return cls(text=value.text, inbound=value)
        return cls(text=value)
