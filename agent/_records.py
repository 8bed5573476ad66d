"""The records that cross the store seam: turn, session, ledger and commit shapes, and their
statuses. Plain frozen dataclasses, so a store needs nothing of the engine's workings; a leaf
module (it imports only answerers, messages, events and turn inputs), so every part of the
engine can use them without an import circle. `agent.seams` is where store authors find them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agent._events import TurnEvent
from agent._hitl_answerers import Answerer
from agent._messages import JsonValue, Message
from agent._turn_input import TurnInput


class TurnStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUSPENDED = "suspended"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED)


UNFINISHED = (TurnStatus.QUEUED, TurnStatus.RUNNING)


class CancelReason(StrEnum):
    """Why the engine (or a Stop) cancels a turn: the reasons it gives itself, in one place
    so the renderer's words for them and the stores that record them name the same thing.

    Stored as these strings (`TurnRecord.cancel_reason`, `turn.cancelled`'s `reason`), so rows
    and events written before the enum read back unchanged. A reason is not always one of
    these: a host may give its own (the HTTP API's `reason`, the bot's `"uninstalled"`), so a
    parameter that takes one is `CancelReason | str`, and a stored reason reads back as `str`.
    """

    REPLACED = "replaced"
    """A newer message superseded it (`AgentSession.start(replace=True)`)."""
    RESET = "reset"
    """The session was reset (`AgentSession.reset`): every unfinished turn ends."""
    STOPPED = "stopped"
    """A person's Stop (`AgentSession.stop`'s default)."""
    CANCELLED = "cancelled"
    """Asked to stop with no other reason (`AgentSession.cancel`'s default)."""


class TurnKind(StrEnum):
    TURN = "turn"
    RESET = "reset"
    """A session reset queued on the turn chain, so it runs in order with the turns around it."""


class ReceiptStatus(StrEnum):
    PREPARED = "prepared"
    COMPLETED = "completed"
    FAILED = "failed"
    UNCERTAIN = "uncertain"


class ConfirmationStatus(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    DENIED = "denied"
    EXPIRED = "expired"
    """Nobody answered in time (its expiry timer fired), or a session reset retired it: an
    approval from before a reset never acts after it."""


class SessionStatus(StrEnum):
    NEW = "new"
    IDLE = "idle"
    RUNNING = "running"
    SUSPENDED = "suspended"


@dataclass(frozen=True, kw_only=True)
class TurnRecord:
    session: str
    turn_id: str
    seq: int
    status: TurnStatus
    input: TurnInput
    result: JsonValue = None
    cancel_reason: str | None = None
    kind: TurnKind = TurnKind.TURN
    fingerprint: str | None = None
    """The agent fingerprint the turn started under (set with its opening commit)."""
    cancelled_by: str | None = None
    """Who asked the turn to stop (`AgentSession.stop(by=...)`), with `cancel_reason`."""
    created_at: float = 0.0
    """When the turn was queued (the store's clock)."""


@dataclass(frozen=True, kw_only=True)
class ConfirmationRecord:
    """A write the model proposed and a person must confirm before it runs (not a park).

    `details` is set only for a `confirmation="capability"` tool: the JSON object it showed with
    its own prompt, which the person approves and the tool checks again before it writes. A
    `confirmation="required"` proposal has none: its arguments are what is approved.
    """

    session: str
    confirmation_id: str
    turn_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    prompt: str
    answerers: Answerer | None = None
    """Who may answer; None: no restriction. Stores keep it as its JSON (`answerers_to_json`)."""
    details: dict[str, Any] | None = None
    status: ConfirmationStatus = ConfirmationStatus.PENDING
    by: str | None = None
    follow_up_turn: str | None = None
    created_at: float = 0.0
    resolved_at: float | None = None
    reason: str | None = None
    """What the person who answered said with it (scrubbed, at most `MAX_REASON_CHARS`)."""
    expires_at: float | None = None
    """When it expires if nobody answers (its timer); None: never."""
    approved_arguments: dict[str, Any] | None = None
    """What the approver changed the call to before approving it, which is what ran
    (`agent._hitl_edits`); None: it ran, if approved, as proposed (`arguments`)."""


class TimerKind(StrEnum):
    INPUT = "input"
    """A parked `ctx.request_input`: `request_id` is the input id, `turn_id` the parked turn."""
    CONFIRMATION = "confirmation"
    """A proposed write: `request_id` is the confirmation id, `turn_id` the proposing turn."""


class TimerAction(StrEnum):
    """What a due timer does to its request."""

    EXPIRE = "expire"
    """Ends it unanswered (`agent._hitl_expiry`)."""
    REMIND = "remind"
    """Reminds whoever may answer, once (`agent._hitl_reminding`)."""
    ESCALATE = "escalate"
    """Lets its `answerers` answer too, and tells them, once (`agent._hitl_reminding`)."""


@dataclass(frozen=True, kw_only=True)
class ApprovalTimer:
    """When a request put to a person expires, or is to be reminded or escalated: a row
    committed with the request itself, so nothing waits in memory and a restart loses no timer.
    Whichever process sweeps first applies it (`Runtime.expire_due`): an expiry through the same
    answer path a person uses, a reminder or an escalation by marking it `fired_at` (the claim).
    Every timer of a request goes in the transaction that ends the request."""

    session: str
    kind: TimerKind
    turn_id: str
    request_id: str
    due_at: float
    expires_after: float
    """For an expiry, the request's lifetime in seconds (the text the model reads when it
    expired); for a reminder or an escalation, the seconds after the request it fires."""
    created_at: float = 0.0
    action: TimerAction = TimerAction.EXPIRE
    answerers: Answerer | None = None
    """An escalation's: who may answer once it fired, besides the request's own answerers."""
    fired_at: float | None = None
    """When a reminder or an escalation fired (None: not yet); an escalation's row stays, as
    the durable fact that its answerers may answer, until the request ends."""


@dataclass(frozen=True, kw_only=True)
class ReceiptRecord:
    """What is known about one keyed external write; `key` is `<tool>:<key>`, per session."""

    session: str
    key: str
    receipt_id: str
    fingerprint: str
    status: ReceiptStatus
    turn_id: str
    step_id: str
    attempt: int = 1
    value: JsonValue = None
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FactRecord:
    """A versioned fact a tool recorded, with the evidence of where it came from."""

    session: str
    key: str
    version: int
    value: JsonValue
    turn_id: str
    step_id: str
    call_id: str
    created_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class ArchivedGeneration:
    """A generation retired by a reset: its rows, kept queryable."""

    session: str
    generation: int
    messages: list[Message]
    steps: dict[str, JsonValue]
    events: list[TurnEvent]
    facts: list[FactRecord]


@dataclass(frozen=True, kw_only=True)
class PruneCounts:
    """What a retention batch removed (or, in a dry run, would remove), by kind.

    A pruned turn keeps its row (id, status, result): the tombstone that makes a re-delivered
    turn id replay its stored result instead of running again."""

    turns: int = 0
    """Finished turns whose steps and events were removed."""
    steps: int = 0
    events: int = 0
    generations: int = 0
    """Archived generations (what resets retired) removed whole."""
    archived_rows: int = 0
    """Their messages, steps, events and facts."""
    receipts: int = 0
    held: int = 0
    """Old turns left alone this time: their session is live (a turn queued or running) or
    parked (waiting on a person), or some of their events are not delivered yet."""

    def __add__(self, other: PruneCounts) -> PruneCounts:
        return PruneCounts(
            **{name: getattr(self, name) + getattr(other, name) for name in _PRUNE_KINDS}
        )


_PRUNE_KINDS = ("turns", "steps", "events", "generations", "archived_rows", "receipts", "held")


@dataclass(frozen=True, kw_only=True)
class SessionRecord:
    key: str
    status: SessionStatus
    generation: int
    lease_owner: str | None
    lease_epoch: int
    lease_expires_at: float
    pending: JsonValue = None
    updated_at: float = 0.0
    """When the session row was last written (the store's clock): a step committed, a lease
    taken, a park answered or stopped. A turn queued again after its park ended has waited
    since then at most, which is what `bot turns --stuck` measures a queued turn by."""


@dataclass(frozen=True, kw_only=True)
class TranscriptTail:
    """The recent end of a session's transcript: `messages` are those from index `base` on.

    It begins where a turn begins (its opening user or trigger message), so the model never
    sees a tool result without the call it answers."""

    base: int
    messages: list[Message]


@dataclass(frozen=True, kw_only=True)
class Lease:
    """Proof that this worker may commit steps of `session` while `epoch` is current."""

    session: str
    owner: str
    epoch: int


@dataclass(frozen=True, kw_only=True)
class StepCommit:
    """One atomic unit: a step's memo, its messages, its events and the turn/session status."""

    turn_id: str
    step_id: str | None = None
    step_value: JsonValue = None
    messages: Sequence[tuple[int, Message]] = ()
    events: Sequence[TurnEvent] = ()
    turn_status: TurnStatus | None = None
    turn_result: JsonValue = None
    session_status: SessionStatus | None = None
    set_pending: bool = False
    pending: JsonValue = None
    confirmations: Sequence[ConfirmationRecord] = ()
    facts: Sequence[FactRecord] = ()
    turn_fingerprint: str | None = None
    timers: Sequence[ApprovalTimer] = ()
    """Expiry timers of the requests this step makes (a park, a proposed write)."""
