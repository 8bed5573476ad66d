"""The HTTP turn API's bodies and answers, as pydantic models: requests are validated with them
and the OpenAPI description (`bot.api.openapi`) is generated from them, so the two cannot
drift. Bodies are strict (no `"true"` for true, no unknown keys): a client's mistake is a 422
naming the field, never a guess."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.api.keys import TURN_ID_PATTERN

MAX_REASON_CHARS = 2000
"""A longer reason is refused (the engine keeps at most this much of one anyway)."""
MAX_ID_CHARS = 512


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class TurnBody(_Body):
    """`POST /sessions/{key}/turns`."""

    text: str = Field(min_length=1, description="What the caller says (at most MAX_INBOUND_CHARS).")
    turn_id: str | None = Field(
        default=None,
        pattern=f"^{TURN_ID_PATTERN}$",
        description="Idempotency: the same id again is the same turn, run once. Default: the "
        "Idempotency-Key header, else a new id.",
    )
    speaker: str | None = Field(
        default=None,
        max_length=MAX_ID_CHARS,
        description="Optional; if given it must be the token's own user (403 otherwise): a "
        "token speaks only as its principal.",
    )
    replace: bool = Field(
        default=False,
        description="Supersede the session's queued or running turn (never a parked one).",
    )


class ResumeBody(_Body):
    """`POST /sessions/{key}/resume`: the answer to the request the session is parked on."""

    turn_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    input_id: str = Field(min_length=1, max_length=MAX_ID_CHARS)
    value: Any = Field(description="The answer; it must fit the request's schema (422).")
    digest: str = Field(
        min_length=1,
        max_length=128,
        description="The request's digest (from GET pending or input.requested): an answer "
        "binds to the exact request, so a request that changed since is a 409.",
    )
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)


class AllowAgainBody(_Body):
    """ "Approve, and allow this again": with an approval of a tool declared `grantable_for`,
    also let that tool's later calls from the same speaker run without asking, in this thread
    or this channel, for `seconds` (at most the tool's limit). Where the engine cannot issue the
    grant (a denial, a tool that does not allow it, too long, several approvers needed, no
    verified speaker, no channel) the answer is a 422 with its reason and nothing is applied."""

    scope: Literal["thread", "channel"]
    seconds: float = Field(gt=0, allow_inf_nan=False, description="How long the grant lasts.")


class ConfirmBody(_Body):
    """`POST /sessions/{key}/confirmations/{id}`: approve or deny a proposed write."""

    accepted: bool
    reason: str | None = Field(default=None, max_length=MAX_REASON_CHARS)
    digest: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="The proposal's digest (from GET pending): given, the answer binds to "
        "the exact proposal shown, and one that is not it is a 409. Left out, the "
        "confirmation id alone names it (a proposal never changes once recorded).",
    )
    allow_again: AllowAgainBody | None = Field(
        default=None,
        description="With `accepted` true: also issue a standing grant (see `AllowAgainBody`).",
    )
    edits: dict[str, Any] | None = Field(
        default=None,
        max_length=64,
        description="With `accepted` true, for a proposal whose `editable` lists arguments: "
        "the new values of those the caller changed (`{argument: value}`). The call runs with "
        "them; an argument that is not editable, or a value the tool's schema refuses, is a "
        "422 naming each field (`detail`) and nothing is applied.",
    )


class CancelBody(_Body):
    """`POST /sessions/{key}/cancel`: one turn, or (no turn id) every unfinished turn; only
    what the token's principal may stop (403 otherwise): a parked turn, if they may answer it
    or asked it; a running one, if they asked it or the agent's "stop" policy admits them."""

    turn_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    reason: str | None = Field(default=None, min_length=1, max_length=200)


# -- answers ---------------------------------------------------------------------------------


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UsageOut(_Out):
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int


class TurnOut(_Out):
    """A turn as it stands: ended (completed, failed, cancelled), parked (suspended, with the
    request to answer), or still queued or running (a 202: poll `poll`)."""

    session: str
    turn_id: str
    status: Literal["queued", "running", "suspended", "completed", "failed", "cancelled"]
    text: str = Field(
        description="Exactly what the model said: a completed turn's last reply; for a "
        "suspended, cancelled or failed turn, its replies so far (joined by a blank line). "
        "Never filled in for the model: an empty reply stays empty (see `note`)."
    )
    error: str | None
    reason: str | None
    request: dict[str, Any] | None = Field(
        description="What a suspended turn waits for: the first of `requests`."
    )
    requests: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Every request a suspended turn waits for, in call order (the calls of "
        "one model reply that each asked wait together; answer each on its own).",
    )
    usage: UsageOut = Field(description="Summed over every model step of the turn so far.")
    replayed: bool
    poll: str
    note: str | None = Field(
        description="Set when a completed turn's last reply is empty: what the turn did "
        "instead, each tool call with its outcome (`ok`, `failed`, `denied`, `expired`, "
        "`cancelled`, `not run: awaits confirmation`), e.g. `The agent added nothing after its "
        "tool calls: lookup_order (ok), issue_refund (denied).`, or `The agent had nothing to "
        "add.` Show it where the reply would have been. Also set when the model declined "
        "(a refusal): `The model declined to answer this request. ...`; `text` is then what it "
        "said before it stopped, and the request is left out of the conversation from then on."
    )


class EventOut(BaseModel):
    """A durable event (`seq` > 0, its place in the session's log) or a live one (`live`
    true, `seq` 0, never stored): a `message.delta`, a preview of the message in progress,
    which the `message.completed` that follows replaces, or a `progress.updated`, the model's
    progress in that step so far (each replaces the last; never part of its words). The other
    fields are the event's own."""

    model_config = ConfigDict(extra="allow")

    seq: int = Field(ge=0)
    type: str
    session: str
    turn_id: str
    live: bool


class EventsOut(_Out):
    events: list[EventOut]
    last_seq: int = Field(description="Pass as ?after= (or Last-Event-ID) to read on.")


class VotesOut(_Out):
    """Where a request that needs several approvals (`Quorum`) stands: who approved and who
    denied (user ids, in vote order), how many approvals it needs, and the outcome once the
    votes decide it (null: still waiting for others)."""

    need: int
    approved_by: list[str]
    denied_by: list[str]
    outcome: Literal["approved", "denied"] | None
    counted: bool = Field(
        description="In an answer's reply: false when the caller had voted already (their "
        "first vote stands; this one changed nothing)."
    )


class PendingInputOut(_Out):
    turn_id: str
    input_id: str
    prompt: str
    json_schema: dict[str, Any] | None = Field(alias="schema")
    answerers: dict[str, Any] | None
    digest: str
    tool: str
    expires_at: float | None
    may_answer: bool = Field(description="Whether this token's principal may answer it.")
    votes: VotesOut | None = Field(default=None, description="Votes so far (a `Quorum` only).")

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)


class PendingConfirmationOut(_Out):
    confirmation_id: str
    turn_id: str
    tool: str
    arguments: dict[str, Any]
    prompt: str
    details: dict[str, Any] | None
    answerers: dict[str, Any] | None
    digest: str = Field(description="What an answer binds to (`digest` of the confirm body).")
    created_at: float
    expires_at: float | None
    may_answer: bool
    votes: VotesOut | None = Field(default=None, description="Votes so far (a `Quorum` only).")
    editable: list[str] | None = Field(
        default=None,
        description="The arguments an approval may change (`edits` of the confirm body); "
        "null: it is approved or denied as proposed.",
    )


class PendingOut(_Out):
    session: str
    input: PendingInputOut | None = Field(
        description="The first of `inputs` (kept for clients written when one request waited "
        "at a time)."
    )
    inputs: list[PendingInputOut] = Field(
        description="Every request the parked turn waits on, in call order: the calls of one "
        "model reply that each asked wait together, and each is answered on its own."
    )
    confirmations: list[PendingConfirmationOut]


class ResumeOut(_Out):
    session: str
    turn_id: str
    input_id: str
    poll: str
    votes: VotesOut | None = Field(
        default=None,
        description="For a request that needs several approvals: the tally after this vote; "
        "the turn resumes only once `outcome` is set.",
    )


class GrantOut(_Out):
    """A standing grant as stored: which tool, where, whose calls it covers, who granted it and
    when (times in seconds since the epoch), and its revocation, if any."""

    grant_id: str
    tool: str
    team: str
    enterprise: str | None
    scope: Literal["thread", "channel"]
    session: str = Field(
        description="The engine's key of the session it was granted in (`api:<team>:<key>` "
        "for an API session, `slack:...` for a Slack thread); a `thread` grant covers only it."
    )
    channel: str | None = Field(description="The channel a `channel` grant covers.")
    speaker: str = Field(description="Whose calls it covers (a user id).")
    granted_by: str
    confirmation_id: str = Field(description="The approval it came with.")
    created_at: float
    expires_at: float
    revoked_at: float | None
    revoked_by: str | None


class GrantsOut(_Out):
    grants: list[GrantOut] = Field(description="Live grants of the workspace, newest first.")


class ConfirmOut(_Out):
    session: str
    confirmation_id: str
    accepted: bool
    turn_id: str = Field(
        description="The turn that acts on the answer (for a `Quorum`, queued once the votes "
        "decide: see `votes`)."
    )
    poll: str
    votes: VotesOut | None = Field(
        default=None, description="For a proposal that needs several approvals: the tally."
    )
    grant: GrantOut | None = Field(
        default=None,
        description="The standing grant `allow_again` issued (null without one): its "
        "`grant_id` is what `DELETE /grants/{grant_id}` revokes.",
    )
    approved_arguments: dict[str, Any] | None = Field(
        default=None,
        description="The call as `edits` changed it, which is what runs (null: as proposed).",
    )


class AnsweredOut(_Out):
    """One proposed write of the session and what became of it (the audit)."""

    confirmation_id: str
    turn_id: str
    tool: str
    prompt: str
    status: Literal["pending", "accepted", "denied", "expired"]
    by: str | None = Field(description="Who answered (the deciding vote, for a `Quorum`).")
    reason: str | None
    arguments: dict[str, Any] = Field(description="The call as the model proposed it.")
    approved_arguments: dict[str, Any] | None = Field(
        description="The call as the approver edited it, which is what ran (null: as proposed)."
    )
    created_at: float
    resolved_at: float | None
    follow_up_turn: str | None = Field(description="The turn that acted on the answer.")
    votes: VotesOut | None = Field(default=None, description="A `Quorum`'s votes.")


class ConfirmationsOut(_Out):
    session: str
    confirmations: list[AnsweredOut] = Field(
        description="Every proposed write of the session, newest first, at most `limit`."
    )


class CancelOut(_Out):
    session: str
    cancelled: list[str]


class ResetOut(_Out):
    """`applied`: the history is archived (`archived_generation`) and the session starts
    `generation`; `queued`: the reset waits its turn behind a running one (202) and applies."""

    session: str
    status: Literal["applied", "queued"]
    archived_generation: int | None
    generation: int | None


class ErrorDetail(_Out):
    loc: list[str | int]
    msg: str


class ErrorOut(_Out):
    error: str
    detail: list[ErrorDetail] | None = None


BODIES: tuple[type[BaseModel], ...] = (TurnBody, ResumeBody, ConfirmBody, CancelBody)
ANSWERS: tuple[type[BaseModel], ...] = (
    TurnOut,
    EventOut,
    EventsOut,
    PendingOut,
    ResumeOut,
    ConfirmOut,
    ConfirmationsOut,
    GrantOut,
    GrantsOut,
    CancelOut,
    ResetOut,
    ErrorOut,
)
