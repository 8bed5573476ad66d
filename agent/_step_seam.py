"""The store's role for running a turn: `StepLog` (leases, step commits, the transcript and the
event log read back), and `StoreHandle`, what a local tool gets to write in the step's
transaction."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agent._events import TurnEvent
from agent._messages import JsonValue, Message
from agent._records import Lease, StepCommit, TranscriptTail

_R = TypeVar("_R")


class StoreHandle(Protocol):
    """What a local tool gets as `ctx.store`."""

    def unwrap(self) -> Any:
        """The backend's own handle joined to the step's transaction (a SQLAlchemy `Connection`).

        Raises `FatalToolError` where the backend has none, so a write never goes nowhere.
        """
        ...


class StepLog(Protocol):
    """What a worker running a turn goes through: the session's lease that fences it, each step
    committed with its messages and events, and the transcript, steps and event log read back.
    Its contract: tests/contract/test_session_store.py and test_compaction_tail.py."""

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
        run: Callable[[StoreHandle], _R],
        build: Callable[[_R], StepCommit],
        ttl: float,
        now: float,
    ) -> tuple[_R, list[TurnEvent]]:
        """Run a local tool inside the step's transaction, then commit `build(result)` in it.

        If `run` raises, its writes are rolled back (where the backend can) and the exception
        propagates; nothing is committed.
        """
        ...

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        """The memoized steps of one turn, keyed by step id, in commit order."""
        ...

    async def load_transcript(self, session: str) -> list[Message]:
        """The live transcript in index order (a host reading the conversation)."""
        ...

    async def load_transcript_tail(
        self, session: str, at_least: int, *, since_compaction: bool = False
    ) -> TranscriptTail:
        """What a worker reads when it picks a session up: the last `at_least` messages or more,
        from the opening of the turn the earliest of them belongs to (everything when the
        transcript is no longer). Its cost must not grow with the transcript: a resumed turn
        waits on it.

        `since_compaction=True` (the model's API compacts long threads): `at_least` is ignored;
        the tail starts at the opening of the turn holding the newest message that
        `holds_compaction`, or at the session's start if none does, however many messages that
        is (the API's compaction bounds it). Finding that message must not read the transcript:
        mark it when it is committed. The live generation only: a reset's archive keeps its own."""
        ...

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        """Durable events with seq > after_seq, oldest first: catch-up for late subscribers."""
        ...
