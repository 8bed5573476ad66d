"""`MemoryStore`: the `SessionStore` seam in dicts, for tests, examples and the offline demo.

It keeps the SQL store's semantics (lease fencing, the suspended refusal, gapless event seqs that
survive resets, conflicts leaving nothing behind, single-winner resumes) so code tested against it
behaves the same on SQL. It keeps the rows SQL would hold (`storage.memory.state`), so nothing
read back aliases what a caller passed in.

Two things it cannot do, by design:
- Local tools get no transactional handle: `ctx.store.unwrap()` raises `FatalToolError`, so a
  tool that needs one fails loudly instead of writing somewhere that does not roll back.
- Nothing a local tool does can be undone: if `run` raises, the exception propagates and the step
  commits nothing, but any side effect the tool had already caused stays.

Every method runs under one `asyncio.Lock`, so each call is atomic with respect to the others, as
a transaction would be. Only `commit_local` awaits while holding it: the local tool runs on a
worker thread, as it would inside a SQL store's transaction, so a tool that takes a second takes
it from this store's callers, not from the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from agent.seams import (
    ApprovalTimer,
    ArchivedGeneration,
    CancelReason,
    JsonValue,
    Lease,
    LeaseLostError,
    Message,
    PruneCounts,
    SessionRecord,
    SessionStatus,
    StepCommit,
    StoreHandle,
    TimerKind,
    TranscriptTail,
    TurnEvent,
    TurnInput,
    TurnKind,
    TurnRecord,
    TurnStatus,
    VoteRecord,
    event_from_json,
    message_from_json,
)
from storage.json_text import load_json
from storage.ledger_records import timer_record
from storage.memory import followups as memory_followups
from storage.memory import prune as memory_prune
from storage.memory import state as ops
from storage.memory import votes as memory_votes
from storage.memory.grants import GrantMethods, GrantRows
from storage.memory.ledger_methods import LedgerMethods, run_alongside
from storage.memory.state import NoHandle, RowIds, Rows, SessionState
from storage.memory.transcript import transcript_tail
from storage.records import (
    OPEN_VALUES,
    RESET_INPUT,
    UNFINISHED_VALUES,
    encode_commit,
    encode_events,
    new_turn,
    numbered,
    session_record,
    turn_record,
)

R = TypeVar("R")


class MemoryStore(LedgerMethods, GrantMethods):
    """A `SessionStore` in process memory; everything is lost when the process ends."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._sessions: dict[str, SessionState] = {}
        self._ids = RowIds()
        self._grants: GrantRows = {}
        """Standing grants span sessions (a CHANNEL grant covers many), so the store holds them."""

    async def close(self) -> None:
        """Nothing to release; kept so the store is interchangeable with `SqlStore`."""

    def _state(self, session: str) -> SessionState:
        return self._sessions.setdefault(session, SessionState(key=session))

    # -- turns ----------------------------------------------------------------------------------

    async def enqueue_turn(
        self,
        session: str,
        turn_id: str,
        input: TurnInput,
        *,
        cancel_unfinished: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
    ) -> tuple[TurnRecord, bool]:
        row = new_turn(
            session,
            turn_id,
            input.model_dump_json(),
            kind=TurnKind.TURN,
            now=time.time(),
            speaker=input.speaker_key,
        )
        async with self._lock:
            state = self._state(session)
            # Run first: nothing here can be rolled back, so a failing write must come before
            # the turn is queued. (It cannot see the turn, and has no handle to write with.)
            if alongside is not None and not ops.refuses(state, turn_id):
                alongside(NoHandle())
            return ops.enqueue(
                state, self._ids, row, refuse_if_parked=True, cancel_unfinished=cancel_unfinished
            )

    async def enqueue_reset(self, session: str, reset_id: str) -> TurnRecord:
        row = new_turn(session, reset_id, RESET_INPUT, kind=TurnKind.RESET, now=time.time())
        async with self._lock:
            record, _ = ops.enqueue(
                self._state(session),
                self._ids,
                row,
                refuse_if_parked=False,
                cancel_unfinished=CancelReason.RESET,
            )
            return record

    async def apply_reset(
        self, lease: Lease, reset_id: str, events: Sequence[TurnEvent], ttl: float, now: float
    ) -> tuple[int, list[TurnEvent]]:
        rows = encode_events(lease.session, events)
        async with self._lock:
            state = self._fence(lease)
            archived, last_seq = ops.apply_reset(state, reset_id, rows, now + ttl, now)
            state.updated_at = now
        return archived, numbered(events, last_seq)

    async def read_archive(self, session: str, generation: int) -> ArchivedGeneration:
        async with self._lock:
            return ops.read_archive(self._sessions.get(session), session, generation)

    async def request_cancel(self, session: str, turn_id: str, reason: str) -> TurnRecord | None:
        async with self._lock:
            state = self._sessions.get(session)
            return None if state is None else ops.request_cancel(state, turn_id, reason)

    async def stop_session(
        self,
        session: str,
        *,
        reason: str,
        by: str | None,
        now: float,
        ended_park: Callable[[JsonValue], Sequence[TurnEvent]] | None = None,
    ) -> tuple[list[TurnRecord], list[TurnEvent]]:
        async with self._lock:
            state = self._sessions.get(session)
            if state is None:
                return [], []
            stopped, logged, last_seq = ops.stop_session(state, reason, by, now, ended_park)
        return stopped, numbered(logged, last_seq)

    async def resume_turn(
        self,
        session: str,
        turn_id: str,
        *,
        expected_pending: JsonValue,
        answer_step: str,
        answer: JsonValue,
        notes: Mapping[str, JsonValue] | None = None,
        events: Sequence[TurnEvent] = (),
        alongside: Callable[[StoreHandle], None] | None = None,
        still_pending: JsonValue = None,
        request_id: str | None = None,
    ) -> list[TurnEvent]:
        rows = encode_events(session, events)
        async with self._lock:
            last_seq = ops.resume(
                self._sessions.get(session),
                self._ids,
                turn_id,
                expected_pending,
                {answer_step: answer, **(notes or {})},
                rows,
                before_write=run_alongside(alongside),
                still_pending=still_pending,
                request_id=request_id,
            )
        return numbered(events, last_seq)

    async def cast_vote(
        self,
        vote: VoteRecord,
        *,
        expected_pending: JsonValue = None,
        events: Sequence[TurnEvent] = (),
    ) -> tuple[list[VoteRecord], list[TurnEvent]]:
        rows = encode_events(vote.session, events)
        async with self._lock:
            state = self._sessions.get(vote.session)
            votes, last_seq = memory_votes.cast(state, vote, expected_pending, rows, time.time())
        return votes, [] if last_seq is None else numbered(events, last_seq)

    async def list_votes(
        self, session: str, kind: TimerKind, turn_id: str, request_id: str
    ) -> list[VoteRecord]:
        async with self._lock:
            state = self._sessions.get(session)
            return [] if state is None else memory_votes.listed(state, kind, turn_id, request_id)

    async def fire_timer(
        self, timer: ApprovalTimer, now: float, events: Sequence[TurnEvent] = ()
    ) -> list[TurnEvent]:
        rows = encode_events(timer.session, events)
        async with self._lock:
            last_seq = memory_followups.fire(self._sessions.get(timer.session), timer, now, rows)
        return [] if last_seq is None else numbered(events, last_seq)

    async def fired_escalations(
        self, session: str, kind: TimerKind, turn_id: str, request_id: str
    ) -> list[ApprovalTimer]:
        async with self._lock:
            state = self._sessions.get(session)
            return memory_followups.fired(state, kind, turn_id, request_id)

    async def get_turn(self, session: str, turn_id: str) -> TurnRecord | None:
        async with self._lock:
            state = self._sessions.get(session)
            row = state.turns.get(turn_id) if state else None
            return None if row is None else turn_record(row)

    async def next_turn(self, session: str) -> TurnRecord | None:
        async with self._lock:
            for row in self._turns(session):
                if row["status"] in UNFINISHED_VALUES:
                    return turn_record(row)
            return None

    async def list_turns(self, session: str) -> list[TurnRecord]:
        async with self._lock:
            state = self._sessions.get(session)
            live = state.generation if state else 0
            return [turn_record(r) for r in self._turns(session) if r["generation"] == live]

    async def open_turns(self) -> list[TurnRecord]:
        async with self._lock:
            rows = [row for state in self._sessions.values() for row in state.turns.values()]
        opened = [row for row in rows if row["status"] in OPEN_VALUES]
        return [turn_record(row) for row in sorted(opened, key=lambda row: int(row["id"]))]

    async def list_parked(self) -> list[SessionRecord]:
        async with self._lock:
            parked = [
                session_record(state.row())
                for state in self._sessions.values()
                if state.status == SessionStatus.SUSPENDED and state.pending is not None
            ]
        return sorted(parked, key=lambda record: record.key)

    async def open_work(self) -> list[tuple[SessionRecord, list[TurnRecord]]]:
        async with self._lock:
            found = [
                (session_record(state.row()), [turn_record(row) for row in opened])
                for key, state in sorted(self._sessions.items())
                if (
                    opened := [
                        row for row in state.turns_in_order() if row["status"] in OPEN_VALUES
                    ]
                )
            ]
        return found

    async def failure_streaks(self, at_least: int) -> list[list[TurnRecord]]:
        got_somewhere = (TurnStatus.COMPLETED, TurnStatus.CANCELLED, TurnStatus.SUSPENDED)
        streaks: list[list[TurnRecord]] = []
        async with self._lock:
            for _, state in sorted(self._sessions.items()):
                streak: list[Rows] = []
                for row in state.turns_in_order():
                    if row["generation"] != state.generation or row["kind"] != TurnKind.TURN:
                        continue
                    if row["status"] == TurnStatus.FAILED:
                        streak.append(row)
                    elif row["status"] in got_somewhere:
                        streak = []
                if len(streak) >= max(at_least, 1):
                    streaks.append([turn_record(row) for row in streak])
        return streaks

    async def recent_turns(self, speaker: str, limit: int) -> list[TurnRecord]:
        async with self._lock:
            rows = [
                row
                for state in self._sessions.values()
                for row in state.turns.values()
                if row["speaker"] == speaker
            ]
        rows.sort(key=lambda row: int(row["id"]), reverse=True)
        return [turn_record(row) for row in rows[:limit]]

    async def due_timers(self, now: float, limit: int = 100) -> list[ApprovalTimer]:
        async with self._lock:
            rows = [
                row
                for state in self._sessions.values()
                for row in state.timers.values()
                if row["due_at"] <= now and row.get("fired_at") is None
            ]
        rows.sort(key=lambda row: (row["due_at"], int(row["id"])))
        return [timer_record(row) for row in rows[:limit]]

    async def drop_timer(self, timer: ApprovalTimer) -> None:
        async with self._lock:
            state = self._sessions.get(timer.session)
            if state is not None:
                state.drop_request_timers(timer.kind.value, timer.turn_id, timer.request_id)

    async def get_session(self, session: str) -> SessionRecord | None:
        async with self._lock:
            state = self._sessions.get(session)
            return None if state is None else session_record(state.row())

    async def load_transcript(self, session: str) -> list[Message]:
        async with self._lock:
            state = self._sessions.get(session)
            bodies = [state.messages[i]["body"] for i in sorted(state.messages)] if state else []
        return [message_from_json(body) for body in bodies]

    async def load_transcript_tail(
        self, session: str, at_least: int, *, since_compaction: bool = False
    ) -> TranscriptTail:
        async with self._lock:
            state = self._sessions.get(session)
            rows = [state.messages[i] for i in sorted(state.messages)] if state else []
        return transcript_tail(rows, at_least, since_compaction)

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        async with self._lock:
            state = self._sessions.get(session)
            rows = list(state.steps.values()) if state else []
        return {r["step_id"]: load_json(r["value"]) for r in rows if r["turn_id"] == turn_id}

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        async with self._lock:
            state = self._sessions.get(session)
            rows = [row for row in state.events if row["seq"] > after_seq] if state else []
        return [
            event_from_json(row["body"], session=session, seq=row["seq"]) for row in rows[:limit]
        ]

    async def recoverable_sessions(self, now: float) -> list[str]:
        async with self._lock:
            return sorted(
                key
                for key, state in self._sessions.items()
                if (state.lease_owner is None or state.lease_expires_at < now)
                and any(t["status"] in UNFINISHED_VALUES for t in state.turns.values())
            )

    def _turns(self, session: str) -> list[Rows]:
        state = self._sessions.get(session)
        return state.turns_in_order() if state else []

    # -- leases and step commits ----------------------------------------------------------------

    async def acquire_lease(self, session: str, owner: str, ttl: float, now: float) -> Lease | None:
        async with self._lock:
            state = self._sessions.get(session)
            if state is None or (state.lease_owner is not None and state.lease_expires_at >= now):
                return None
            state.lease_owner = owner
            state.lease_epoch += 1
            state.lease_expires_at = now + ttl
            state.updated_at = now
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

    def _held(self, lease: Lease) -> SessionState | None:
        state = self._sessions.get(lease.session)
        if state is None or state.lease_owner != lease.owner or state.lease_epoch != lease.epoch:
            return None
        return state

    def _fence(self, lease: Lease) -> SessionState:
        state = self._held(lease)
        if state is None:
            raise LeaseLostError(
                f"lease on session {lease.session!r} (owner {lease.owner!r}, epoch {lease.epoch}) "
                "is no longer held"
            )
        return state

    async def commit(
        self, lease: Lease, commit: StepCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        encoded = encode_commit(lease.session, commit)
        async with self._lock:
            state = self._fence(lease)
            last_seq = ops.apply_commit(state, self._ids, commit, encoded, now + ttl, now)
            state.updated_at = now
        return numbered(commit.events, last_seq)

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
            result = await asyncio.to_thread(run, NoHandle())
            commit = build(result)
            encoded = encode_commit(lease.session, commit)
            last_seq = ops.apply_commit(state, self._ids, commit, encoded, now + ttl, now)
            state.updated_at = now
        return result, numbered(commit.events, last_seq)

    # -- retention ------------------------------------------------------------------------------

    async def prune_history(
        self,
        *,
        before: float,
        after: int = 0,
        limit: int = 500,
        dry_run: bool = False,
        delivered: Callable[[Sequence[str]], Awaitable[Mapping[str, int]]] | None = None,
        now: float | None = None,
    ) -> tuple[PruneCounts, int | None]:
        async with self._lock:
            picked = memory_prune.candidates(self._sessions.values(), before, after, limit)
        if not picked:
            return PruneCounts(), None
        horizons: Mapping[str, int] = {}
        if delivered is not None:
            horizons = await delivered(sorted({state.key for state, _ in picked}))
        stamp = time.time() if now is None else now
        async with self._lock:
            # Picked again under the lock: what the first look saw may have changed since.
            ids = {int(turn["id"]) for _, turn in picked}
            again = memory_prune.candidates(self._sessions.values(), before, after, limit)
            kept = [(state, turn) for state, turn in again if int(turn["id"]) in ids]
            counts = memory_prune.prune_turns(kept, horizons, dry_run, stamp)
        return counts, int(picked[-1][1]["id"]) if len(picked) >= limit else None

    async def prune_receipts(
        self, *, before: float, after: int = 0, limit: int = 500, dry_run: bool = False
    ) -> tuple[int, int | None]:
        async with self._lock:
            picked = memory_prune.receipt_candidates(self._sessions.values(), before, after, limit)
            removed = memory_prune.prune_receipts(picked, dry_run)
        return removed, int(picked[-1][1]["id"]) if len(picked) >= limit else None
