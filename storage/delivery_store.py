"""`DeliveryStore`: the Slack renderer's durable memory, on its own engine over `DATABASE_URL`.

A renderer writes here before and after every Slack call that creates a message: the row goes in
as `posting` with the key it also writes into the message's metadata, and gets its `ts` once Slack
answers. A row still `posting` after a crash is the one uncertain case, settled by looking for the
key in the thread. The cursor and the bodies of open messages are saved in one transaction, so
after a restart "what Slack shows" can be put back to exactly "what the log says was delivered".

Targets carry a lease like the engine's sessions do: of several processes that could render one
session (two clocks, web and clock), only the holder posts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Row, inspect, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.errors import SchemaMismatchError
from storage.delivery_schema import DELIVERY_REVISION, delivery_posts, delivery_targets
from storage.sql_dialects import WRITE_OPTION, dialect_for


@dataclass(frozen=True, kw_only=True)
class Target:
    session_key: str
    team: str
    channel: str
    thread_ts: str | None
    user_id: str | None
    cursor: int
    active: bool
    activity: int


@dataclass(frozen=True, kw_only=True)
class Post:
    post_key: str
    session_key: str
    turn_id: str
    kind: str
    channel: str
    thread_ts: str | None
    part: int = 0
    ts: str | None = None
    state: str = "posting"
    mode: str = "stream"
    body: dict[str, Any] = field(default_factory=dict)
    opened_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class PostUpdate:
    """A change to one post saved together with the cursor."""

    post_key: str
    body: dict[str, Any] | None = None
    state: str | None = None
    ts: str | None = None
    mode: str | None = None


class DeliveryStore:
    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._writer = engine.execution_options(**{WRITE_OPTION: True})

    @classmethod
    async def open(cls, url: str) -> DeliveryStore:
        """Raises `SchemaMismatchError` naming `bot db upgrade` when migration 0002 is missing."""
        engine = dialect_for(url).create_engine()
        try:
            async with engine.connect() as conn:
                await conn.run_sync(_check_tables)
        except BaseException:
            await engine.dispose()
            raise
        return cls(engine)

    async def close(self) -> None:
        await self._engine.dispose()

    # targets ------------------------------------------------------------------------------

    async def register(
        self,
        session_key: str,
        *,
        team: str,
        channel: str,
        thread_ts: str | None,
        user_id: str | None,
        now: float,
    ) -> None:
        """Remember where a session's replies go and flag it as having work to render."""
        values = {
            "session_key": session_key,
            "team": team,
            "channel": channel,
            "thread_ts": thread_ts,
            "user_id": user_id,
            "active": 1,
            "activity": 1,
            "updated_at": now,
        }
        stmt = self._insert(delivery_targets, values)
        changes: dict[str, Any] = {
            "active": 1,
            "activity": delivery_targets.c.activity + 1,
            "updated_at": now,
        }
        if user_id is not None:
            changes["user_id"] = user_id
        async with self._writer.begin() as conn:
            await conn.execute(
                stmt.on_conflict_do_update(index_elements=["session_key"], set_=changes)
            )

    async def mark_active(self, session_key: str, now: float) -> None:
        stmt = (
            update(delivery_targets)
            .where(delivery_targets.c.session_key == session_key)
            .values(active=1, activity=delivery_targets.c.activity + 1, updated_at=now)
        )
        async with self._writer.begin() as conn:
            await conn.execute(stmt)

    async def get_target(self, session_key: str) -> Target | None:
        query = select(delivery_targets).where(delivery_targets.c.session_key == session_key)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _target(row)

    async def latest_in_channel(self, team: str, channel: str) -> Target | None:
        """The most recently active threaded session of a channel (what a bare reset means)."""
        query = (
            select(delivery_targets)
            .where(
                delivery_targets.c.team == team,
                delivery_targets.c.channel == channel,
                delivery_targets.c.thread_ts.is_not(None),
            )
            .order_by(delivery_targets.c.updated_at.desc())
            .limit(1)
        )
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _target(row)

    async def active_sessions(self) -> list[str]:
        query = select(delivery_targets.c.session_key).where(delivery_targets.c.active == 1)
        async with self._engine.connect() as conn:
            return list((await conn.execute(query)).scalars().all())

    async def acquire(self, session_key: str, owner: str, ttl: float, now: float) -> bool:
        """Take (or keep) the right to render this session; False while another holds it."""
        c = delivery_targets.c
        stmt = (
            update(delivery_targets)
            .where(
                c.session_key == session_key,
                (c.lease_owner.is_(None)) | (c.lease_owner == owner) | (c.lease_expires_at < now),
            )
            .values(lease_owner=owner, lease_expires_at=now + ttl)
        )
        async with self._writer.begin() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    async def release(self, session_key: str, owner: str) -> None:
        c = delivery_targets.c
        stmt = (
            update(delivery_targets)
            .where(c.session_key == session_key, c.lease_owner == owner)
            .values(lease_owner=None, lease_expires_at=0)
        )
        async with self._writer.begin() as conn:
            await conn.execute(stmt)

    async def go_idle(self, session_key: str, activity: int) -> bool:
        """Clear `active` unless the session was registered again since `activity` was read."""
        c = delivery_targets.c
        stmt = (
            update(delivery_targets)
            .where(c.session_key == session_key, c.activity == activity)
            .values(active=0)
        )
        async with self._writer.begin() as conn:
            return (await conn.execute(stmt)).rowcount == 1

    # posts --------------------------------------------------------------------------------

    async def begin_post(self, post: Post, now: float) -> Post:
        """Record the intent to post before calling Slack; returns the stored row (an existing
        one wins, so a repeated call never makes a second row for one key)."""
        values = {
            "post_key": post.post_key,
            "session_key": post.session_key,
            "turn_id": post.turn_id,
            "kind": post.kind,
            "part": post.part,
            "channel": post.channel,
            "thread_ts": post.thread_ts,
            "ts": post.ts,
            "state": post.state,
            "mode": post.mode,
            "body": json.dumps(post.body),
            "opened_at": post.opened_at or now,
            "updated_at": now,
        }
        async with self._writer.begin() as conn:
            await conn.execute(self._insert(delivery_posts, values).on_conflict_do_nothing())
            row = (
                await conn.execute(
                    select(delivery_posts).where(delivery_posts.c.post_key == post.post_key)
                )
            ).one()
        return _post(row)

    async def get_post(self, post_key: str) -> Post | None:
        query = select(delivery_posts).where(delivery_posts.c.post_key == post_key)
        async with self._engine.connect() as conn:
            row = (await conn.execute(query)).first()
        return None if row is None else _post(row)

    async def posts(
        self,
        session_key: str,
        *,
        turn_id: str | None = None,
        kind: str | None = None,
        states: Sequence[str] | None = None,
    ) -> list[Post]:
        c = delivery_posts.c
        query = select(delivery_posts).where(c.session_key == session_key)
        if turn_id is not None:
            query = query.where(c.turn_id == turn_id)
        if kind is not None:
            query = query.where(c.kind == kind)
        if states is not None:
            query = query.where(c.state.in_(list(states)))
        async with self._engine.connect() as conn:
            rows = (await conn.execute(query.order_by(c.opened_at, c.part))).all()
        return [_post(row) for row in rows]

    async def update_post(self, change: PostUpdate, now: float) -> None:
        async with self._writer.begin() as conn:
            await _apply(conn, change, now)

    async def delete_post(self, post_key: str) -> None:
        stmt = delivery_posts.delete().where(delivery_posts.c.post_key == post_key)
        async with self._writer.begin() as conn:
            await conn.execute(stmt)

    async def save(
        self, session_key: str, cursor: int, changes: Iterable[PostUpdate], now: float
    ) -> None:
        """Advance the cursor and save post bodies atomically: after a crash, what Slack should
        show for every open post matches exactly the events up to the cursor."""
        c = delivery_targets.c
        async with self._writer.begin() as conn:
            for change in changes:
                await _apply(conn, change, now)
            await conn.execute(
                update(delivery_targets)
                .where(c.session_key == session_key, c.cursor < cursor)
                .values(cursor=cursor)
            )

    # helpers ------------------------------------------------------------------------------

    def _insert(self, table: Any, values: dict[str, Any]) -> Any:
        """The dialect's INSERT, which both spell ON CONFLICT the same way."""
        if self._engine.dialect.name == "postgresql":
            return postgresql.insert(table).values(**values)
        return sqlite.insert(table).values(**values)


async def _apply(conn: Any, change: PostUpdate, now: float) -> None:
    values: dict[str, Any] = {"updated_at": now}
    if change.body is not None:
        values["body"] = json.dumps(change.body)
    if change.state is not None:
        values["state"] = change.state
    if change.ts is not None:
        values["ts"] = change.ts
    if change.mode is not None:
        values["mode"] = change.mode
    await conn.execute(
        update(delivery_posts).where(delivery_posts.c.post_key == change.post_key).values(**values)
    )


def _check_tables(connection: Connection) -> None:
    present = set(inspect(connection).get_table_names())
    missing = sorted({delivery_targets.name, delivery_posts.name} - present)
    if missing:
        raise SchemaMismatchError(
            f"the database has no Slack delivery tables ({', '.join(missing)}; migration "
            f"{DELIVERY_REVISION}); run `bot db upgrade`."
        )


def _target(row: Row[Any]) -> Target:
    m = row._mapping
    return Target(
        session_key=m["session_key"],
        team=m["team"],
        channel=m["channel"],
        thread_ts=m["thread_ts"],
        user_id=m["user_id"],
        cursor=int(m["cursor"]),
        active=bool(m["active"]),
        activity=int(m["activity"]),
    )


def _post(row: Row[Any]) -> Post:
    m = row._mapping
    return Post(
        post_key=m["post_key"],
        session_key=m["session_key"],
        turn_id=m["turn_id"],
        kind=m["kind"],
        part=int(m["part"]),
        channel=m["channel"],
        thread_ts=m["thread_ts"],
        ts=m["ts"],
        state=m["state"],
        mode=m["mode"],
        body=json.loads(m["body"] or "{}"),
        opened_at=float(m["opened_at"]),
    )
