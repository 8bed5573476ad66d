"""The three seams the engine stands on: `SessionStore`, `EventSink` and `Model`.

Everything the engine persists goes through `SessionStore`; everything it shows live goes through
`EventSink`; every model call goes through `Model`. The records passed across the store seam are
plain frozen dataclasses so an implementation needs nothing from the engine's internals.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
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


class StoreHandle(Protocol):
    """What a local tool gets as `ctx.store`."""

    def unwrap(self) -> Any:
        """The backend's own handle joined to the step's transaction (a SQLAlchemy `Connection`).

        Raises `FatalToolError` where the backend has none, so a write never goes nowhere.
        """
        ...


class SessionStore(Protocol):
    async def enqueue_turn(
        self, session: str, turn_id: str, input: TurnInput
    ) -> tuple[TurnRecord, bool]:
        """Durably queue a turn, or return the existing one; the bool says it was created.

        Raises `SessionSuspendedError` if the session is parked on a different turn; the check and
        the insert are one transaction.
        """
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
        """The live transcript in index order; read once when a worker picks a session up."""
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
    async def emit(self, event: TurnEvent) -> None:
        """Deliver one live event; must not raise into the turn (the turn does not wait on it)."""
        ...


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
    thinking: bool = False


class ModelRequest(_Frozen):
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = ModelSettings()


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
        """Stream text deltas, then exactly one `ModelReply`; raise `ModelError` on failure."""
        ...
