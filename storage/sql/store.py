"""`SqlStore`: the `SessionStore` seam on SQLAlchemy Core, for SQLite and PostgreSQL.

Each method is one transaction (a prune batch: a read, then one write) whose body is a sync
function in `sql_turns`, `sql_parks`, `sql_commit`, `sql_reset`, `sql_ledgers`, `sql_prune` or
`storage.sql.grants` (whose `GrantMethods` this class mixes in); the dialect's executor runs it
on a worker thread (SQLite's one, or one of PostgreSQL's pool), never on the event loop. The SQL
is written once; this class only encodes arguments, picks read or write, and numbers events.

Every write starts by touching the session row, so writes to one session serialise on that row
(PostgreSQL row lock; SQLite's database write lock, taken up front by BEGIN IMMEDIATE). A fenced
write starts with an UPDATE of the session row conditioned on the lease owner and epoch, which
also extends the lease and reserves the event seqs. If it matches no row the lease is gone, and
nothing else is written. A commit never reads or rewrites the transcript, so a step costs the
same at message 10 or 10,000.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from agent.seams import (
    ApprovalTimer,
    ArchivedGeneration,
    CancelReason,
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    JsonValue,
    Lease,
    Message,
    PruneCounts,
    ReceiptRecord,
    ReceiptStatus,
    SessionRecord,
    StepCommit,
    StoreHandle,
    TimerKind,
    TranscriptTail,
    TurnEvent,
    TurnInput,
    TurnKind,
    TurnRecord,
    VoteRecord,
)
from storage.ledger_records import confirmation_answer
from storage.migrate import verify_schema
from storage.records import RESET_INPUT, encode_commit, encode_events, new_turn, numbered
from storage.sql import commit as sql_commit
from storage.sql import followups as sql_followups
from storage.sql import ledgers as sql_ledgers
from storage.sql import parks as sql_parks
from storage.sql import prune as sql_prune
from storage.sql import reset as sql_reset
from storage.sql import transcript as sql_transcript
from storage.sql import turns as sql_turns
from storage.sql import votes as sql_votes
from storage.sql.commit import run_local
from storage.sql.dialects import SqlDialect, dialect_for
from storage.sql.executor import TransactionExecutor
from storage.sql.grants import GrantMethods

R = TypeVar("R")


class SqlStore(GrantMethods):
    """A `SessionStore` on a SQL database; make one with `await SqlStore.open(url)`."""

    def __init__(self, executor: TransactionExecutor, dialect: SqlDialect) -> None:
        self._x = executor
        self._dialect = dialect

    @classmethod
    async def open(cls, url: str) -> SqlStore:
        """Connect and check the schema; raises `SchemaMismatchError` naming the upgrade command."""
        dialect = dialect_for(url)
        executor = dialect.executor()
        try:
            await executor.read(verify_schema)
        except BaseException:
            await executor.close()
            raise
        return cls(executor, dialect)

    @property
    def dialect(self) -> str:
        """`sqlite` or `postgresql`: for `run_sync` callers whose SQL differs (PRAGMA vs SHOW)."""
        return self._dialect.name

    async def run_sync(
        self, fn: Callable[[Connection], R], *, write: bool = False, urgent: bool = False
    ) -> R:
        """Run `fn` with a sync `Connection` in one transaction, the way the store's own methods
        run (so on SQLite, on the store's thread and connection): for operators' queries and
        tests. A read (the default) is rolled back afterwards; `write=True` commits if `fn`
        returns, for tables of the caller's own: the store's rows change only through its API.
        `urgent`: see `TransactionExecutor.write`."""
        if write:
            return await self._x.write(fn, urgent=urgent)
        return await self._x.read(fn, urgent=urgent)

    async def close(self) -> None:
        await self._x.close()

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

        def body(c: Connection) -> tuple[TurnRecord, bool]:
            queued = sql_turns.enqueue(
                c, self._dialect, row, refuse_if_parked=True, cancel_unfinished=cancel_unfinished
            )
            if alongside is not None:
                run_local(c, alongside)
            return queued

        return await self._x.write(body, urgent=True)

    async def enqueue_reset(self, session: str, reset_id: str) -> TurnRecord:
        row = new_turn(session, reset_id, RESET_INPUT, kind=TurnKind.RESET, now=time.time())
        record, _ = await self._x.write(
            lambda c: sql_turns.enqueue(
                c, self._dialect, row, refuse_if_parked=False, cancel_unfinished=CancelReason.RESET
            ),
            urgent=True,
        )
        return record

    async def apply_reset(
        self, lease: Lease, reset_id: str, events: Sequence[TurnEvent], ttl: float, now: float
    ) -> tuple[int, list[TurnEvent]]:
        rows = encode_events(lease.session, events)
        archived, last_seq = await self._x.write(
            lambda c: sql_reset.apply_reset(c, lease, reset_id, rows, ttl, now)
        )
        return archived, numbered(events, last_seq)

    async def read_archive(self, session: str, generation: int) -> ArchivedGeneration:
        return await self._x.read(lambda c: sql_reset.read_archive(c, session, generation))

    async def request_cancel(self, session: str, turn_id: str, reason: str) -> TurnRecord | None:
        return await self._x.write(
            lambda c: sql_turns.request_cancel(c, session, turn_id, reason), urgent=True
        )

    async def stop_session(
        self,
        session: str,
        *,
        reason: str,
        by: str | None,
        now: float,
        ended_park: Callable[[JsonValue], Sequence[TurnEvent]] | None = None,
    ) -> tuple[list[TurnRecord], list[TurnEvent]]:
        stopped, logged, last_seq = await self._x.write(
            lambda c: sql_parks.stop_session(c, session, reason, by, now, ended_park),
            urgent=True,
        )
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
        now = time.time()
        answers = {answer_step: answer, **(notes or {})}
        encode_events(session, events)  # refused before the transaction, as a commit's are

        def body(c: Connection) -> int:
            last_seq = sql_parks.resume(
                c,
                session,
                turn_id,
                expected_pending,
                answers,
                events,
                now,
                still_pending=still_pending,
                request_id=request_id,
            )
            if alongside is not None:
                run_local(c, alongside)
            return last_seq

        last_seq = await self._x.write(body, urgent=True)
        return numbered(events, last_seq)

    async def cast_vote(
        self,
        vote: VoteRecord,
        *,
        expected_pending: JsonValue = None,
        events: Sequence[TurnEvent] = (),
    ) -> tuple[list[VoteRecord], list[TurnEvent]]:
        encode_events(vote.session, events)  # refused before the transaction, as a commit's are
        now = time.time()
        votes, last_seq = await self._x.write(
            lambda c: sql_votes.cast(c, vote, expected_pending, events, now), urgent=True
        )
        return votes, [] if last_seq is None else numbered(events, last_seq)

    async def list_votes(
        self, session: str, kind: TimerKind, turn_id: str, request_id: str
    ) -> list[VoteRecord]:
        return await self._x.read(
            lambda c: sql_votes.list_votes(c, session, kind, turn_id, request_id)
        )

    async def fire_timer(
        self, timer: ApprovalTimer, now: float, events: Sequence[TurnEvent] = ()
    ) -> list[TurnEvent]:
        encode_events(timer.session, events)
        last_seq = await self._x.write(lambda c: sql_followups.fire(c, timer, now, events))
        return [] if last_seq is None else numbered(events, last_seq)

    async def fired_escalations(
        self, session: str, kind: TimerKind, turn_id: str, request_id: str
    ) -> list[ApprovalTimer]:
        return await self._x.read(
            lambda c: sql_followups.fired_escalations(c, session, kind, turn_id, request_id)
        )

    async def get_turn(self, session: str, turn_id: str) -> TurnRecord | None:
        return await self._x.read(lambda c: sql_turns.get_turn(c, session, turn_id))

    async def next_turn(self, session: str) -> TurnRecord | None:
        return await self._x.read(lambda c: sql_turns.next_turn(c, session))

    async def list_turns(self, session: str) -> list[TurnRecord]:
        return await self._x.read(lambda c: sql_turns.list_turns(c, session))

    async def open_turns(self) -> list[TurnRecord]:
        return await self._x.read(sql_turns.open_turns)

    async def list_parked(self) -> list[SessionRecord]:
        return await self._x.read(sql_turns.list_parked)

    async def open_work(self) -> list[tuple[SessionRecord, list[TurnRecord]]]:
        return await self._x.read(sql_turns.open_work)

    async def failure_streaks(self, at_least: int) -> list[list[TurnRecord]]:
        return await self._x.read(lambda c: sql_turns.failure_streaks(c, at_least))

    async def recent_turns(self, speaker: str, limit: int) -> list[TurnRecord]:
        return await self._x.read(lambda c: sql_turns.recent_turns(c, speaker, limit))

    async def due_timers(self, now: float, limit: int = 100) -> list[ApprovalTimer]:
        return await self._x.read(lambda c: sql_turns.due_timers(c, now, limit))

    async def drop_timer(self, timer: ApprovalTimer) -> None:
        await self._x.write(lambda c: sql_turns.drop_timer(c, timer))

    async def get_session(self, session: str) -> SessionRecord | None:
        return await self._x.read(lambda c: sql_turns.get_session(c, session))

    async def load_transcript(self, session: str) -> list[Message]:
        return await self._x.read(lambda c: sql_transcript.load_transcript(c, session))

    async def load_transcript_tail(
        self, session: str, at_least: int, *, since_compaction: bool = False
    ) -> TranscriptTail:
        return await self._x.read(
            lambda c: sql_transcript.load_transcript_tail(
                c, session, at_least, since_compaction=since_compaction
            ),
            urgent=True,
        )

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        return await self._x.read(lambda c: sql_turns.load_steps(c, session, turn_id))

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        return await self._x.read(lambda c: sql_turns.read_events(c, session, after_seq, limit))

    async def recoverable_sessions(self, now: float) -> list[str]:
        return await self._x.read(lambda c: sql_turns.recoverable_sessions(c, now))

    # -- leases and step commits ----------------------------------------------------------------

    async def acquire_lease(self, session: str, owner: str, ttl: float, now: float) -> Lease | None:
        epoch = await self._x.write(lambda c: sql_commit.acquire_lease(c, session, owner, ttl, now))
        return None if epoch is None else Lease(session=session, owner=owner, epoch=epoch)

    async def renew_lease(self, lease: Lease, ttl: float, now: float) -> bool:
        return await self._x.write(lambda c: sql_commit.renew_lease(c, lease, ttl, now))

    async def release_lease(self, lease: Lease) -> None:
        await self._x.write(lambda c: sql_commit.release_lease(c, lease))

    async def commit(
        self, lease: Lease, commit: StepCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        encoded = encode_commit(lease.session, commit)
        last_seq = await self._x.write(
            lambda c: sql_commit.commit_step(c, lease, commit, encoded, ttl, now)
        )
        return numbered(commit.events, last_seq)

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], R],
        build: Callable[[R], StepCommit],
        ttl: float,
        now: float,
    ) -> tuple[R, list[TurnEvent]]:
        result, commit, last_seq = await self._x.write(
            lambda c: sql_commit.commit_local(c, lease, run, build, ttl, now)
        )
        return result, numbered(commit.events, last_seq)

    # -- confirmations, receipts, facts ---------------------------------------------------------

    async def get_confirmation(
        self, session: str, confirmation_id: str
    ) -> ConfirmationRecord | None:
        return await self._x.read(
            lambda c: sql_ledgers.get_confirmation(c, session, confirmation_id)
        )

    async def list_confirmations(
        self, session: str, status: ConfirmationStatus | None = None
    ) -> list[ConfirmationRecord]:
        return await self._x.read(lambda c: sql_ledgers.list_confirmations(c, session, status))

    async def pending_confirmations(self) -> list[ConfirmationRecord]:
        return await self._x.read(sql_ledgers.pending_confirmations)

    async def answered_confirmations(
        self, since: float | None = None, limit: int = 100
    ) -> list[ConfirmationRecord]:
        return await self._x.read(lambda c: sql_ledgers.answered_confirmations(c, since, limit))

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
        status: ConfirmationStatus | None = None,
        reason: str | None = None,
        alongside: Callable[[StoreHandle], None] | None = None,
        approved_arguments: dict[str, Any] | None = None,
    ) -> tuple[TurnRecord, list[TurnEvent]]:
        rows = encode_events(session, events)
        answer = confirmation_answer(
            accepted,
            by,
            follow_up_turn,
            now,
            status=status,
            reason=reason,
            approved_arguments=approved_arguments,
        )
        turn = new_turn(
            session, follow_up_turn, follow_up.model_dump_json(), kind=TurnKind.TURN, now=now
        )

        def body(c: Connection) -> tuple[TurnRecord, int]:
            resolved = sql_ledgers.resolve_confirmation(c, confirmation_id, answer, turn, rows)
            if alongside is not None:
                run_local(c, alongside)
            return resolved

        record, last_seq = await self._x.write(body, urgent=True)
        return record, numbered(events, last_seq)

    async def get_receipt(self, session: str, key: str) -> ReceiptRecord | None:
        return await self._x.read(lambda c: sql_ledgers.get_receipt(c, session, key))

    async def prepare_receipt(
        self, lease: Lease, receipt: ReceiptRecord, ttl: float, now: float
    ) -> ReceiptRecord:
        if receipt.session != lease.session:
            raise ValueError(f"receipt for {receipt.session!r} prepared under {lease.session!r}")
        return await self._x.write(
            lambda c: sql_ledgers.prepare_receipt(c, lease, receipt, ttl, now)
        )

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
        return await self._x.write(
            lambda c: sql_ledgers.settle_receipt(
                c, session, key, receipt_id, status, value, error, from_statuses, now
            )
        )

    async def list_receipts(
        self, *, session: str | None = None, status: ReceiptStatus | None = None
    ) -> list[ReceiptRecord]:
        return await self._x.read(lambda c: sql_ledgers.list_receipts(c, session, status))

    async def get_fact(self, session: str, key: str) -> FactRecord | None:
        return await self._x.read(lambda c: sql_ledgers.get_fact(c, session, key))

    async def fact_history(self, session: str, key: str) -> list[FactRecord]:
        return await self._x.read(lambda c: sql_ledgers.fact_history(c, session, key))

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
        picked = await self._x.read(lambda c: sql_prune.candidates(c, before, after, limit))
        if not picked:
            return PruneCounts(), None
        horizons: Mapping[str, int] = {}
        if delivered is not None:
            horizons = await delivered(sorted({c.session for c in picked}))
        stamp = time.time() if now is None else now

        def body(c: Connection) -> PruneCounts:
            return sql_prune.prune_turns(c, picked, before, horizons, dry_run, stamp)

        counts = await (self._x.read(body) if dry_run else self._x.write(body))
        return counts, picked[-1].id if len(picked) >= limit else None

    async def prune_receipts(
        self, *, before: float, after: int = 0, limit: int = 500, dry_run: bool = False
    ) -> tuple[int, int | None]:
        picked = await self._x.read(lambda c: sql_prune.receipt_candidates(c, before, after, limit))
        if not picked:
            return 0, None

        def body(c: Connection) -> int:
            return sql_prune.prune_receipts(c, picked, before, dry_run)

        removed = await (self._x.read(body) if dry_run else self._x.write(body))
        return removed, picked[-1].id if len(picked) >= limit else None
