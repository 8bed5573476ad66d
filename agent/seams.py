"""The three seams the engine stands on: `SessionStore`, `EventSink` and `Model`.

Everything the engine persists goes through `SessionStore`; everything it shows live goes through
`EventSink`; every model call goes through `Model`. The records passed across the store seam are
plain frozen dataclasses so an implementation needs nothing from the engine's internals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from agent.events import TurnEvent
from agent.messages import ContentBlock, JsonValue, Message, Usage
from agent.turn_input import TurnInput

R = TypeVar("R")


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
    """Retired by a session reset: an approval from before a reset never acts after it."""


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
    answerers: JsonValue = None
    details: dict[str, Any] | None = None
    status: ConfirmationStatus = ConfirmationStatus.PENDING
    by: str | None = None
    follow_up_turn: str | None = None
    created_at: float = 0.0
    resolved_at: float | None = None


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
class SessionRecord:
    key: str
    status: SessionStatus
    generation: int
    lease_owner: str | None
    lease_epoch: int
    lease_expires_at: float
    pending: JsonValue = None


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


class StoreHandle(Protocol):
    """What a local tool gets as `ctx.store`."""

    def unwrap(self) -> Any:
        """The backend's own handle joined to the step's transaction (a SQLAlchemy `Connection`).

        Raises `FatalToolError` where the backend has none, so a write never goes nowhere.
        """
        ...


class SessionStore(Protocol):
    async def enqueue_turn(
        self,
        session: str,
        turn_id: str,
        input: TurnInput,
        *,
        cancel_unfinished: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> tuple[TurnRecord, bool]:
        """Durably queue a turn, or return the existing one; the bool says it was created.

        Raises `SessionSuspendedError` if the session is parked on a different turn, unless a
        reset is pending (it will cancel the park, so the turn queues behind it); the check and
        the insert are one transaction. With `cancel_unfinished`, every queued or running turn of
        the session is asked to cancel with that reason in the same transaction (replace); a
        parked turn is never touched. Nothing is cancelled when the turn id already exists.

        `alongside`: the application's own write, run in that same transaction (also when the
        turn already existed; not when the session refuses it), so what it records about the turn
        exists exactly when the turn does, at the price of no extra commit. It gets the store's
        handle, as a local tool does; if it raises, nothing is queued.
        """
        ...

    async def enqueue_reset(self, session: str, reset_id: str) -> TurnRecord:
        """Queue a reset (kind `reset`) on the turn chain; idempotent by id.

        Allowed while the session is parked (a stale park is how people get out of an approval
        nobody will answer). In the same transaction every queued or running turn is asked to
        cancel with reason `reset`.
        """
        ...

    async def apply_reset(
        self, lease: Lease, reset_id: str, events: Sequence[TurnEvent], ttl: float, now: float
    ) -> tuple[int, list[TurnEvent]]:
        """Fenced, one transaction: archive messages, steps, events and facts under the current
        generation, clear them from the live tables, end a parked turn as cancelled (`reset`),
        expire pending confirmations, clear `pending`, status `new`, generation + 1, and complete
        the reset turn with result
        `{"status": "completed", "archived_generation": g, "generation": g + 1}`. Returns the
        archived generation number and `events` numbered (event seqs never restart)."""
        ...

    async def read_archive(self, session: str, generation: int) -> ArchivedGeneration:
        """The rows a reset archived under `generation` (empty lists if there were none)."""
        ...

    async def request_cancel(self, session: str, turn_id: str, reason: str) -> TurnRecord | None:
        """Durably ask a queued or running turn to stop; None if it is finished or parked.

        The first reason stands; asking again changes nothing.
        """
        ...

    async def resume_turn(
        self,
        session: str,
        turn_id: str,
        *,
        expected_pending: JsonValue,
        answer_step: str,
        answer: JsonValue,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> None:
        """Apply an answer to a parked turn, atomically or not at all.

        In one transaction: the session is `suspended` with `pending` equal to
        `expected_pending`, and no reset is queued; store `answer` as step `answer_step` of the
        turn, set the turn back to `queued` and the session to `running`, clear `pending`.
        Otherwise raise `ResumeConflictError` and change nothing. Of two racing resumes of the same
        request exactly one succeeds. `alongside`: as for `enqueue_turn`, the application's write
        in the same transaction (run only when the answer is applied; if it raises, nothing is).
        """
        ...

    async def get_confirmation(
        self, session: str, confirmation_id: str
    ) -> ConfirmationRecord | None:
        """The confirmation, or None."""
        ...

    async def list_confirmations(
        self, session: str, status: ConfirmationStatus | None = None
    ) -> list[ConfirmationRecord]:
        """Confirmations of the session, oldest first."""
        ...

    async def resolve_confirmation(
        self,
        session: str,
        confirmation_id: str,
        *,
        accepted: bool,
        by: str | None,
        follow_up_turn: str,
        follow_up: TurnInput,
        events: Sequence[TurnEvent],
        now: float,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> tuple[TurnRecord, list[TurnEvent]]:
        """Answer a pending confirmation and queue the turn that acts on the answer, atomically.

        Raises `ResumeConflictError` if it is not pending (answered already, unknown) and
        `SessionSuspendedError` if the session is parked; in both cases nothing changes.
        `events` are appended to the session's log (numbered) in the same transaction, and
        `alongside` (as for `enqueue_turn`) runs in it when the answer is applied.
        """
        ...

    async def get_receipt(self, session: str, key: str) -> ReceiptRecord | None:
        """The receipt for an effect key, or None."""
        ...

    async def prepare_receipt(
        self, lease: Lease, receipt: ReceiptRecord, ttl: float, now: float
    ) -> ReceiptRecord:
        """Fenced: commit a `prepared` receipt before the effect runs.

        Inserts it, or, when the key's receipt is `failed`, replaces it as a new attempt
        (attempt + 1). Raises `StepConflictError` if the key has a receipt in any other state.
        """
        ...

    async def settle_receipt(
        self,
        session: str,
        key: str,
        receipt_id: str,
        status: ReceiptStatus,
        *,
        value: JsonValue = None,
        error: str | None = None,
        from_statuses: Sequence[ReceiptStatus] = (ReceiptStatus.PREPARED,),
        now: float,
    ) -> ReceiptRecord:
        """Move the receipt from one of `from_statuses` to `status`; `StepConflictError` if it is
        not in one of them. Not fenced: what happened at the provider is recorded even by a
        worker that lost its lease."""
        ...

    async def list_receipts(
        self, *, session: str | None = None, status: ReceiptStatus | None = None
    ) -> list[ReceiptRecord]:
        """Receipts across sessions (for operators), oldest first."""
        ...

    async def get_fact(self, session: str, key: str) -> FactRecord | None:
        """The latest version of a fact, or None."""
        ...

    async def fact_history(self, session: str, key: str) -> list[FactRecord]:
        """Every version of a fact, oldest first."""
        ...

    async def open_turns(self) -> list[TurnRecord]:
        """Queued, running and suspended turns of every session (for `bot check`)."""
        ...

    async def get_turn(self, session: str, turn_id: str) -> TurnRecord | None:
        """The turn as committed, or None."""
        ...

    async def next_turn(self, session: str) -> TurnRecord | None:
        """The oldest queued or running turn of the session, in the order they were queued."""
        ...

    async def list_turns(self, session: str) -> list[TurnRecord]:
        """Every turn of the live generation, in queue order."""
        ...

    async def get_session(self, session: str) -> SessionRecord | None:
        """The session row, or None if no turn was ever queued on it."""
        ...

    async def load_transcript(self, session: str) -> list[Message]:
        """The live transcript in index order (a host reading the conversation)."""
        ...

    async def load_transcript_tail(self, session: str, at_least: int) -> TranscriptTail:
        """What a worker reads when it picks a session up: the last `at_least` messages or more,
        from the opening of the turn the earliest of them belongs to (everything when the
        transcript is no longer). Its cost must not grow with the transcript: a resumed turn
        waits on it."""
        ...

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        """The memoized steps of one turn, keyed by step id, in commit order."""
        ...

    async def acquire_lease(self, session: str, owner: str, ttl: float, now: float) -> Lease | None:
        """Take the session's lease if it is free or expired, bumping its epoch; else None."""
        ...

    async def renew_lease(self, lease: Lease, ttl: float, now: float) -> bool:
        """Extend the lease; False if it was lost (the epoch moved on)."""
        ...

    async def release_lease(self, lease: Lease) -> None:
        """Give the lease up if still held, so another worker need not wait for expiry."""
        ...

    async def commit(
        self, lease: Lease, commit: StepCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        """Commit one step atomically, fenced by the lease epoch, and return its events with seqs.

        Raises `LeaseLostError` (and commits nothing) if the lease epoch is no longer current.
        """
        ...

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], R],
        build: Callable[[R], StepCommit],
        ttl: float,
        now: float,
    ) -> tuple[R, list[TurnEvent]]:
        """Run a local tool inside the step's transaction, then commit `build(result)` in it.

        If `run` raises, its writes are rolled back (where the backend can) and the exception
        propagates; nothing is committed.
        """
        ...

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        """Durable events with seq > after_seq, oldest first: catch-up for late subscribers."""
        ...

    async def recoverable_sessions(self, now: float) -> list[str]:
        """Sessions with queued or running turns whose lease is free or expired."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...


class EventSink(Protocol):
    """Where a runtime's live events go (`tests/contract/test_event_sink.py` holds the contract).

    What the engine sends: per session, events in commit order; durable ones numbered as in the
    session's log, each sent once, right after its commit; deltas with seq 0, only inside their
    model step; nothing for a finished turn delivered again. Delivery is live only: what a sink
    missed is read back from the log (`SessionStore.read_events`), never sent twice.
    """

    async def emit(self, event: TurnEvent) -> None:
        """Take one event, in the order given, and never raise into the turn.

        The runtime puts its `EventHub` in front of a host's sink, which waits on a slow sink only
        so long (its `patience`); a sink should still hand slow work off rather than do it here.
        """
        ...


# -- news between processes ------------------------------------------------------------------
# Implemented outside `agent` (`storage.redis_dispatch`, `storage.redis_events`), which is why
# they are seams here: those implementations import only this module and the types beside it.


class Dispatcher(Protocol):
    """Cross-process news: which session has work, which turn should stop. Only a speed-up
    over polling the database, never the record, so losing it loses nothing."""

    async def queued(self, session: str) -> None:
        """Tell some worker that `session` has a turn to run."""
        ...

    async def cancel(
        self, session: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """Tell every worker to signal the session's running turn (see `signal_cancel_here`)."""
        ...


class DispatchTarget(Protocol):
    """What a dispatcher's consumer hands news to: a worker's `Runtime`."""

    @property
    def owner(self) -> str:
        """This worker's name (a dispatcher's consumer name)."""
        ...

    def kick(self, key: str) -> None:
        """Make sure a drain runs for `key`."""
        ...

    def signal_cancel_here(
        self, key: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """Stop the session's running turn here at its next checkpoint."""
        ...


class EventRelay(Protocol):
    """Live events to and from other processes (`storage.redis_events.RedisEventRelay`).

    Only ever a speed-up: what is durable is in the session's log, and a live delta lost costs
    only its early display, so a relay may drop events. It must never block or fail a turn.
    """

    def publish(self, event: TurnEvent) -> None:
        """Send an event this process emitted to the others; returns at once, never raises."""
        ...

    def watch(self, session: str) -> None:
        """`session` has its first observer here: deliver other processes' events of it."""
        ...

    def unwatch(self, session: str) -> None:
        """`session`'s last observer here left: its events need not come here any more."""
        ...


class RelayHub(Protocol):
    """The side of a runtime's event hub a relay plugs into (`agent.sinks.EventHub`)."""

    def connect(self, relay: EventRelay | None) -> None:
        """Send this process's events to `relay` (None: stop)."""
        ...

    def deliver(self, event: TurnEvent) -> None:
        """Hand another process's event to this process's subscribers of its session."""
        ...


class RelayHost(Protocol):
    """What a relay attaches to: a `Runtime`, its hub and its store."""

    @property
    def hub(self) -> RelayHub: ...

    @property
    def store(self) -> SessionStore: ...


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(_Frozen):
    name: str
    description: str
    input_schema: dict[str, Any]


class ModelSettings(_Frozen):
    model: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    """Honoured only by adapters whose API takes it. `AnthropicModel` sends none: the installed
    `anthropic` SDK's Messages API has no temperature parameter. It logs a warning instead."""
    thinking: bool = False


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """A plain dataclass, not pydantic: it wraps the whole transcript, and re-validating ten
    thousand messages on every model step would make a step's cost grow with the transcript."""

    system: str
    messages: Sequence[Message]
    """A snapshot of the transcript (an immutable prefix view, never copied per step)."""
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)


class TextDelta(_Frozen):
    text: str


class StreamRestart(_Frozen):
    """The adapter retried the call: text streamed so far is void."""

    reason: str = ""


class ModelReply(_Frozen):
    content: tuple[ContentBlock, ...]
    stop_reason: str
    usage: Usage = Usage()


ModelEvent = TextDelta | StreamRestart | ModelReply


class Model(Protocol):
    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream text deltas, then exactly one `ModelReply`, last; raise `ModelError` on failure.

        The turn loop relies on this (`tests/contract/test_model.py` holds the contract): the
        deltas after the last `StreamRestart` spell the reply's text; `StreamRestart` comes only
        before the reply; tool calls are `ToolCall` blocks of the reply, with the stop reason
        passed through. The loop may stop reading at any point (a cancel between deltas): it
        then calls the iterator's `aclose()` if it has one, as an async generator does, so an
        adapter holding a connection should be one; a plain `AsyncIterator` is just dropped.
        """
        ...
