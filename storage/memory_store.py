"""`MemoryStore`: the `SessionStore` seam in dicts, for tests, examples and the offline demo.

It keeps the SQL store's semantics (lease fencing, the suspended refusal, gapless event seqs,
conflicts leaving nothing behind) so code tested against it behaves the same on SQL. It keeps
values as the JSON text SQL would hold, so nothing read back aliases what a caller passed in.

Two things it cannot do, by design:
- Local tools get no transactional handle: `ctx.store.unwrap()` raises `FatalToolError`, so a
  tool that needs one fails loudly instead of writing somewhere that does not roll back.
- Nothing a local tool does can be undone: if `run` raises, the exception propagates and the step
  commits nothing, but any side effect the tool had already caused stays.

Every method runs under one `asyncio.Lock` and never awaits while holding it, so each call is
atomic with respect to the others, as a transaction would be.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn, TypeVar

from agent.errors import FatalToolError, LeaseLostError, SessionSuspendedError, StepConflictError
from agent.events import TurnEvent, event_from_json
from agent.messages import JsonValue, Message, message_from_json
from agent.seams import (
    UNFINISHED,
    Lease,
    SessionRecord,
    SessionStatus,
    StepCommit,
    StoreHandle,
    TurnRecord,
    TurnStatus,
)
from agent.turn_input import TurnInput
from storage.records import (
    EncodedCommit,
    EventRow,
    encode_commit,
    load_json,
    numbered,
    parked_on_other_turn,
    session_record,
    suspended_message,
    turn_record,
)

R = TypeVar("R")


@dataclass
class _Turn:
    turn_id: str
    seq: int
    status: str
    input: str
    result: str | None = None
    cancel_reason: str | None = None


@dataclass
class _Session:
    status: str = SessionStatus.NEW.value
    generation: int = 0
    lease_owner: str | None = None
    lease_epoch: int = 0
    lease_expires_at: float = 0.0
    event_seq: int = 0
    pending: str | None = None
    turns: dict[str, _Turn] = field(default_factory=dict)
    messages: dict[int, str] = field(default_factory=dict)
    steps: dict[str, tuple[str, str]] = field(default_factory=dict)
    """step id -> (turn id, value); dicts keep insertion order, which is commit order."""
    events: list[tuple[int, EventRow]] = field(default_factory=list)


class _NoHandle:
    def unwrap(self) -> NoReturn:
        raise FatalToolError("this backend has no transactional store handle")


class MemoryStore:
    """A `SessionStore` in process memory; everything is lost when the process ends."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._sessions: dict[str, _Session] = {}
        self._turn_seq = 0

    async def close(self) -> None:
        """Nothing to release; kept so the store is interchangeable with `SqlStore`."""

    # -- turns ------------------------------------------------------------------------------

    async def enqueue_turn(
        self, session: str, turn_id: str, input: TurnInput
    ) -> tuple[TurnRecord, bool]:
        async with self._lock:
            state = self._sessions.setdefault(session, _Session())
            existing = state.turns.get(turn_id)
            if existing is not None:
                return _record(session, existing), False
            if parked_on_other_turn(state.status, state.pending, turn_id):
                raise SessionSuspendedError(suspended_message(session, state.pending))
            self._turn_seq += 1
            turn = _Turn(
                turn_id=turn_id,
                seq=self._turn_seq,
                status=TurnStatus.QUEUED.value,
                input=input.model_dump_json(),
            )
            state.turns[turn_id] = turn
            return _record(session, turn), True

    async def get_turn(self, session: str, turn_id: str) -> TurnRecord | None:
        async with self._lock:
            state = self._sessions.get(session)
            turn = state.turns.get(turn_id) if state else None
            return None if turn is None else _record(session, turn)

    async def next_turn(self, session: str) -> TurnRecord | None:
        unfinished = {status.value for status in UNFINISHED}
        async with self._lock:
            for turn in self._turns(session):
                if turn.status in unfinished:
                    return _record(session, turn)
            return None

    async def list_turns(self, session: str) -> list[TurnRecord]:
        async with self._lock:
            return [_record(session, turn) for turn in self._turns(session)]

    async def get_session(self, session: str) -> SessionRecord | None:
        async with self._lock:
            state = self._sessions.get(session)
            if state is None:
                return None
            return session_record(
                key=session,
                status=state.status,
                generation=state.generation,
                lease_owner=state.lease_owner,
                lease_epoch=state.lease_epoch,
                lease_expires_at=state.lease_expires_at,
                pending=state.pending,
            )

    async def load_transcript(self, session: str) -> list[Message]:
        async with self._lock:
            state = self._sessions.get(session)
            bodies = [state.messages[idx] for idx in sorted(state.messages)] if state else []
        return [message_from_json(body) for body in bodies]

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        async with self._lock:
            state = self._sessions.get(session)
            rows = list(state.steps.items()) if state else []
        return {step_id: load_json(value) for step_id, (turn, value) in rows if turn == turn_id}

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        async with self._lock:
            state = self._sessions.get(session)
            rows = [(seq, row) for seq, row in state.events if seq > after_seq] if state else []
        if limit is not None:
            rows = rows[:limit]
        return [event_from_json(row.body, session=session, seq=seq) for seq, row in rows]

    async def recoverable_sessions(self, now: float) -> list[str]:
        unfinished = {status.value for status in UNFINISHED}
        async with self._lock:
            return sorted(
                key
                for key, state in self._sessions.items()
                if (state.lease_owner is None or state.lease_expires_at < now)
                and any(turn.status in unfinished for turn in state.turns.values())
            )

    def _turns(self, session: str) -> list[_Turn]:
        state = self._sessions.get(session)
        return sorted(state.turns.values(), key=lambda t: t.seq) if state else []

    # -- leases -----------------------------------------------------------------------------

    async def acquire_lease(self, session: str, owner: str, ttl: float, now: float) -> Lease | None:
        async with self._lock:
            state = self._sessions.get(session)
            if state is None or (state.lease_owner is not None and state.lease_expires_at >= now):
                return None
            state.lease_owner = owner
            state.lease_epoch += 1
            state.lease_expires_at = now + ttl
            return Lease(session=session, owner=owner, epoch=state.lease_epoch)

    async def renew_lease(self, lease: Lease, ttl: float, now: float) -> bool:
        async with self._lock:
            state = self._held(lease)
            if state is None:
                return False
            state.lease_expires_at = now + ttl
            return True

    async def release_lease(self, lease: Lease) -> None:
        async with self._lock:
            state = self._held(lease)
            if state is not None:
                state.lease_owner = None
                state.lease_expires_at = 0.0

    def _held(self, lease: Lease) -> _Session | None:
        state = self._sessions.get(lease.session)
        if state is None or state.lease_owner != lease.owner or state.lease_epoch != lease.epoch:
            return None
        return state

    def _fence(self, lease: Lease) -> _Session:
        state = self._held(lease)
        if state is None:
            raise LeaseLostError(
                f"lease on session {lease.session!r} (owner {lease.owner!r}, epoch {lease.epoch}) "
                "is no longer held"
            )
        return state

    # -- step commits -----------------------------------------------------------------------

    async def commit(
        self, lease: Lease, commit: StepCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        encoded = encode_commit(lease.session, commit)
        async with self._lock:
            state = self._fence(lease)
            return self._apply(state, commit, encoded, ttl, now)

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], R],
        build: Callable[[R], StepCommit],
        ttl: float,
        now: float,
    ) -> tuple[R, list[TurnEvent]]:
        async with self._lock:
            state = self._fence(lease)
            result = run(_NoHandle())
            commit = build(result)
            encoded = encode_commit(lease.session, commit)
            return result, self._apply(state, commit, encoded, ttl, now)

    def _apply(
        self, state: _Session, commit: StepCommit, encoded: EncodedCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        """Check every key first, then write: a conflict must leave nothing behind, as on SQL."""
        indexes = [m.idx for m in encoded.messages]
        if (
            (commit.step_id is not None and commit.step_id in state.steps)
            or len(set(indexes)) != len(indexes)
            or any(idx in state.messages for idx in indexes)
        ):
            raise StepConflictError(
                f"session already has step {commit.step_id!r} or one of message indexes {indexes}"
            )
        state.lease_expires_at = now + ttl
        if commit.session_status is not None:
            state.status = SessionStatus(commit.session_status).value
        if commit.set_pending:
            state.pending = encoded.pending
        if commit.step_id is not None and encoded.step_value is not None:
            state.steps[commit.step_id] = (commit.turn_id, encoded.step_value)
        for m in encoded.messages:
            state.messages[m.idx] = m.body
        for row in encoded.events:
            state.event_seq += 1
            state.events.append((state.event_seq, row))
        turn = state.turns.get(commit.turn_id)
        if turn is not None:
            if commit.turn_status is not None:
                turn.status = TurnStatus(commit.turn_status).value
            if encoded.turn_result is not None:
                turn.result = encoded.turn_result
            if encoded.cancel_reason is not None:
                turn.cancel_reason = encoded.cancel_reason
        return numbered(commit.events, state.event_seq)


def _record(session: str, turn: _Turn) -> TurnRecord:
    return turn_record(
        session=session,
        turn_id=turn.turn_id,
        seq=turn.seq,
        status=turn.status,
        input=turn.input,
        result=turn.result,
        cancel_reason=turn.cancel_reason,
    )
