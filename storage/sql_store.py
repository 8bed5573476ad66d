"""`SqlStore`: the `SessionStore` seam on SQLAlchemy async Core, for SQLite and PostgreSQL.

Every write is one transaction that starts by touching the session row, so writes to one session
serialise on that row (PostgreSQL row lock; SQLite's database write lock, taken up front by
BEGIN IMMEDIATE). A step commit starts with the fence: an UPDATE of the session row conditioned on
the lease owner and epoch, which also extends the lease and reserves the event seqs. If it matches
no row the lease is gone, and nothing else is written.

A commit never reads or rewrites the transcript: messages arrive with their indexes and are
appended, so a step costs the same at message 10 or 10,000 (see `storage.sql_commit`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from sqlalchemy import Row, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent.errors import SessionSuspendedError, StepConflictError
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
from storage.migrate import verify_schema
from storage.records import (
    encode_commit,
    load_json,
    numbered,
    parked_on_other_turn,
    session_record,
    suspended_message,
    turn_record,
)
from storage.sql_commit import fence, held, run_local, write_rows
from storage.sql_dialects import WRITE_OPTION, SqlDialect, dialect_for
from storage.sql_schema import events, messages, sessions, steps, turns

R = TypeVar("R")

_UNFINISHED = [status.value for status in UNFINISHED]


class SqlStore:
    """A `SessionStore` on a SQL database; make one with `await SqlStore.open(url)`."""

    def __init__(self, engine: AsyncEngine, dialect: SqlDialect) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})
        self._dialect = dialect

    @classmethod
    async def open(cls, url: str) -> SqlStore:
        """Connect and check the schema; raises `SchemaMismatchError` naming the upgrade command."""
        dialect = dialect_for(url)
        engine = dialect.create_engine()
        try:
            async with engine.connect() as conn:
                await conn.run_sync(verify_schema)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine, dialect)

    @property
    def engine(self) -> AsyncEngine:
        """The underlying engine, for operators' queries and tests; writes belong in the API."""
        return self._engine

    async def close(self) -> None:
        await self._engine.dispose()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        async with self._writer.begin() as conn:
            yield conn

    # -- turns ------------------------------------------------------------------------------

    async def enqueue_turn(
        self, session: str, turn_id: str, input: TurnInput
    ) -> tuple[TurnRecord, bool]:
        now = time.time()
        body = input.model_dump_json()
        async with self._write() as conn:
            await conn.execute(
                self._dialect.insert_ignoring_conflict(sessions, "key").values(
                    key=session, status=SessionStatus.NEW.value, updated_at=now
                )
            )
            # Locks the row on PostgreSQL, so a concurrent park (whose fence updates this row)
            # cannot slip between the suspended check and the insert.
            parked = (
                await conn.execute(
                    select(sessions.c.status, sessions.c.pending)
                    .where(sessions.c.key == session)
                    .with_for_update()
                )
            ).one()
            existing = await _select_turn(conn, session, turn_id)
            if existing is not None:
                return existing, False
            if parked_on_other_turn(parked.status, parked.pending, turn_id):
                raise SessionSuspendedError(suspended_message(session, parked.pending))
            created = (
                await conn.execute(
                    self._dialect.insert_ignoring_conflict(turns, "session_key", "turn_id")
                    .values(
                        session_key=session,
                        turn_id=turn_id,
                        status=TurnStatus.QUEUED.value,
                        input=body,
                        created_at=now,
                    )
                    .returning(turns.c.id)
                )
            ).scalar_one_or_none()
            if created is None:
                # Another writer inserted the same turn between our read and our insert.
                raced = await _select_turn(conn, session, turn_id)
                if raced is None:
                    raise StepConflictError(f"turn {turn_id!r} conflicted but cannot be read")
                return raced, False
        record = TurnRecord(
            session=session,
            turn_id=turn_id,
            seq=int(created),
            status=TurnStatus.QUEUED,
            input=TurnInput.model_validate_json(body),
        )
        return record, True

    async def get_turn(self, session: str, turn_id: str) -> TurnRecord | None:
        async with self._engine.connect() as conn:
            return await _select_turn(conn, session, turn_id)

    async def next_turn(self, session: str) -> TurnRecord | None:
        query = (
            select(turns)
            .where(turns.c.session_key == session, turns.c.status.in_(_UNFINISHED))
            .order_by(turns.c.id)
            .limit(1)
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _turn(row)

    async def list_turns(self, session: str) -> list[TurnRecord]:
        query = select(turns).where(turns.c.session_key == session).order_by(turns.c.id)
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [_turn(row) for row in rows]

    async def get_session(self, session: str) -> SessionRecord | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(select(sessions).where(sessions.c.key == session))).first()
        if row is None:
            return None
        m = row._mapping
        return session_record(
            key=m["key"],
            status=m["status"],
            generation=m["generation"],
            lease_owner=m["lease_owner"],
            lease_epoch=m["lease_epoch"],
            lease_expires_at=m["lease_expires_at"],
            pending=m["pending"],
        )

    async def load_transcript(self, session: str) -> list[Message]:
        query = select(messages.c.body).where(messages.c.session_key == session)
        async with self._engine.connect() as conn:
            bodies = (await conn.execute(query.order_by(messages.c.idx))).scalars().all()
        return [message_from_json(body) for body in bodies]

    async def load_steps(self, session: str, turn_id: str) -> dict[str, JsonValue]:
        query = (
            select(steps.c.step_id, steps.c.value)
            .where(steps.c.session_key == session, steps.c.turn_id == turn_id)
            .order_by(steps.c.id)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return {row.step_id: load_json(row.value) for row in rows}

    async def read_events(
        self, session: str, after_seq: int = 0, limit: int | None = None
    ) -> list[TurnEvent]:
        query = (
            select(events.c.seq, events.c.body)
            .where(events.c.session_key == session, events.c.seq > after_seq)
            .order_by(events.c.seq)
            .limit(limit)
        )
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query)).all()
        return [event_from_json(row.body, session=session, seq=row.seq) for row in rows]

    async def recoverable_sessions(self, now: float) -> list[str]:
        has_work = exists().where(
            turns.c.session_key == sessions.c.key, turns.c.status.in_(_UNFINISHED)
        )
        query = (
            select(sessions.c.key)
            .where(
                or_(sessions.c.lease_owner.is_(None), sessions.c.lease_expires_at < now),
                has_work,
            )
            .order_by(sessions.c.key)
        )
        async with self._engine.connect() as conn:
            return list((await conn.execute(query)).scalars().all())

    # -- leases -----------------------------------------------------------------------------

    async def acquire_lease(self, session: str, owner: str, ttl: float, now: float) -> Lease | None:
        stmt = (
            update(sessions)
            .where(
                sessions.c.key == session,
                or_(sessions.c.lease_owner.is_(None), sessions.c.lease_expires_at < now),
            )
            .values(
                lease_owner=owner,
                lease_epoch=sessions.c.lease_epoch + 1,
                lease_expires_at=now + ttl,
                updated_at=now,
            )
            .returning(sessions.c.lease_epoch)
        )
        async with self._write() as conn:
            epoch = (await conn.execute(stmt)).scalar_one_or_none()
        return None if epoch is None else Lease(session=session, owner=owner, epoch=int(epoch))

    async def renew_lease(self, lease: Lease, ttl: float, now: float) -> bool:
        stmt = update(sessions).where(*held(lease)).values(lease_expires_at=now + ttl)
        async with self._write() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def release_lease(self, lease: Lease) -> None:
        stmt = update(sessions).where(*held(lease)).values(lease_owner=None, lease_expires_at=0)
        async with self._write() as conn:
            await conn.execute(stmt)

    # -- step commits -----------------------------------------------------------------------

    async def commit(
        self, lease: Lease, commit: StepCommit, ttl: float, now: float
    ) -> list[TurnEvent]:
        encoded = encode_commit(lease.session, commit)
        async with self._write() as conn:
            last_seq = await fence(conn, lease, ttl, now, commit, encoded)
            await write_rows(conn, lease.session, commit, encoded, last_seq)
        return numbered(commit.events, last_seq)

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], R],
        build: Callable[[R], StepCommit],
        ttl: float,
        now: float,
    ) -> tuple[R, list[TurnEvent]]:
        async with self._write() as conn:
            # The fence comes first so a zombie worker's tool never writes at all.
            last_seq = await fence(conn, lease, ttl, now)
            result = await conn.run_sync(run_local, run)
            commit = build(result)
            encoded = encode_commit(lease.session, commit)
            if commit.events or commit.session_status is not None or commit.set_pending:
                last_seq = await fence(conn, lease, ttl, now, commit, encoded)
            await write_rows(conn, lease.session, commit, encoded, last_seq)
        return result, numbered(commit.events, last_seq)


async def _select_turn(conn: AsyncConnection, session: str, turn_id: str) -> TurnRecord | None:
    query = select(turns).where(turns.c.session_key == session, turns.c.turn_id == turn_id)
    row = (await conn.execute(query)).first()
    return None if row is None else _turn(row)


def _turn(row: Row[Any]) -> TurnRecord:
    m = row._mapping
    return turn_record(
        session=m["session_key"],
        turn_id=m["turn_id"],
        seq=m["id"],
        status=m["status"],
        input=m["input"],
        result=m["result"],
        cancel_reason=m["cancel_reason"],
    )
