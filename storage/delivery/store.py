"""`DeliveryStore`: the Slack renderer's durable memory, in the database at `DATABASE_URL`.

A renderer writes here before and after every Slack call that creates a message: the row goes in
as `posting` with the key it also writes into the message's metadata, and gets its `ts` once Slack
answers. A row still `posting` after a crash is the one uncertain case, settled by looking for the
key in the thread. The cursor and the bodies of open messages are saved in one transaction, so
after a restart "what Slack shows" can be put back to exactly "what the log says was delivered".

Targets carry a lease like the engine's sessions do: of several processes that could render one
session (two clocks, web and clock), only the holder posts.

Every method is one transaction whose body is a sync function run by a `TransactionExecutor`, as
the engine's store does, and `register` runs before every ack, so it has to be cheap:

- The statements are built once per store with bound parameters: building the INSERT ... ON
  CONFLICT and deriving its cache key on every call costs about as much CPU as executing it.
- On SQLite the transactions run on the engine store's own thread and connection when the bot
  opened that store from the same URL (`open(url, store=...)`). SQLite has one writer: a second
  connection in the same process only waits on the file lock in `busy_timeout`'s sleeps, and an
  async driver hops to its thread for every cursor call.

(What each of these saved: bench/README.md, "Why the store is built as it is".)
- On PostgreSQL they keep an engine of their own, so a burst of renderers cannot take the
  connections the turns need.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy import Row, inspect, select
from sqlalchemy.engine import Connection

from agent.seams import SchemaMismatchError, StoreHandle
from storage.delivery import prune as delivery_prune
from storage.delivery.bodies import PostBody
from storage.delivery.schema import (
    DELIVERY_REVISION,
    delivery_posts,
    delivery_targets,
    slack_feedback,
    slack_home_viewers,
)
from storage.delivery.statements import Statements
from storage.sql.dialects import SqlDialect, dialect_for
from storage.sql.executor import TransactionExecutor

R = TypeVar("R")


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
    body: PostBody = field(default_factory=PostBody)
    """What the message shows or keeps, by kind (`storage.delivery.bodies`)."""
    opened_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Feedback:
    """What one person said of one answer (the last of their clicks on its buttons)."""

    session_key: str
    turn_id: str
    team: str
    user_id: str
    value: str
    """positive | negative"""
    clicked_at: float
    """When Slack says the click happened (its `action_ts`)."""


@dataclass(frozen=True, kw_only=True)
class PostUpdate:
    """A change to one post saved together with the cursor."""

    post_key: str
    body: PostBody | None = None
    state: str | None = None
    ts: str | None = None
    mode: str | None = None


class _StoreTransactions:
    """Transactions on the engine store's executor (its SQLite thread and connection); the store
    is closed by its owner, not here."""

    def __init__(self, store: Any) -> None:
        self._store = store

    async def read(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        result: R = await self._store.run_sync(body, urgent=urgent)
        return result

    async def write(self, body: Callable[[Connection], R], *, urgent: bool = False) -> R:
        result: R = await self._store.run_sync(body, write=True, urgent=urgent)
        return result

    async def close(self) -> None:
        return None


class DeliveryStore:
    def __init__(
        self, transactions: TransactionExecutor, dialect: SqlDialect, *, same_database: bool = False
    ) -> None:
        self._x = transactions
        self._s = Statements(dialect)
        self.same_database = same_database
        """Whether these tables live in the engine store's database, so a registration can be
        written in the engine's own transaction (`registration`)."""

    @classmethod
    async def open(cls, url: str, *, store: Any = None) -> DeliveryStore:
        """Raises `SchemaMismatchError` naming `bot db upgrade` when migration 0002 is missing.

        `store`: the engine's `SqlStore`, opened from this same `url`; on SQLite the delivery
        transactions then share its thread and connection instead of contending for the lock.
        """
        dialect = dialect_for(url)
        transactions: TransactionExecutor
        if store is not None and dialect.one_writer:
            transactions = _StoreTransactions(store)
        else:
            transactions = dialect.executor()
        try:
            await transactions.read(_check_tables)
        except BaseException:
            await transactions.close()
            raise
        return cls(transactions, dialect, same_database=store is not None)

    async def close(self) -> None:
        await self._x.close()

    async def _write(self, statement: Any, params: dict[str, Any]) -> int:
        """Execute one statement in a write transaction; returns its rowcount."""
        return await self._x.write(lambda c: int(c.execute(statement, params).rowcount))

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
        params = _registration(session_key, team, channel, thread_ts, user_id, now)
        statement = self._s.register
        await self._x.write(lambda c: c.execute(statement, params), urgent=True)

    def registration(
        self,
        session_key: str,
        *,
        team: str,
        channel: str,
        thread_ts: str | None,
        user_id: str | None,
        now: float,
    ) -> Callable[[StoreHandle], None]:
        """`register` as a write for the engine's transaction that queues the turn (only where
        `same_database`): the turn and where its replies go then commit together, and the ack
        pays for one commit instead of two (on PostgreSQL about a third of its CPU)."""
        statement = self._s.register
        params = _registration(session_key, team, channel, thread_ts, user_id, now)

        def write(handle: StoreHandle) -> None:
            handle.unwrap().execute(statement, params)

        return write

    async def mark_active(self, session_key: str, now: float) -> None:
        await self._write(self._s.mark_active, {"b_key": session_key, "b_now": now})

    def activation(self, session_key: str, now: float) -> Callable[[StoreHandle], None]:
        """`mark_active` as a write for the engine's transaction that gives the session new work
        (an answer, a confirmation; only where `same_database`). Committed with that work, it
        makes a renderer that read the session as idle fail its `go_idle` and look again, and
        makes the session's sweep find it after a crash, whichever process runs the turn."""
        statement = self._s.mark_active
        params = {"b_key": session_key, "b_now": now}

        def write(handle: StoreHandle) -> None:
            handle.unwrap().execute(statement, params)

        return write

    def post_change(self, change: PostUpdate, now: float) -> Callable[[StoreHandle], None]:
        """`update_post` as a write for the engine's transaction (only where `same_database`):
        e.g. an approval marked answered exactly when the answer commits."""
        statement = self._s.update_post

        def write(handle: StoreHandle) -> None:
            _apply(handle.unwrap(), statement, change, now)

        return write

    async def get_target(self, session_key: str, *, urgent: bool = False) -> Target | None:
        """`urgent` on an ack's path (is the bot part of this thread?); see
        `TransactionExecutor.write`."""
        statement = self._s.get_target
        params = {"b_key": session_key}
        row = await self._x.read(lambda c: c.execute(statement, params).first(), urgent=urgent)
        return None if row is None else _target(row)

    async def latest_in_channel(self, team: str, channel: str) -> Target | None:
        """The most recently active threaded session of a channel (what a bare reset means)."""
        statement = self._s.latest_in_channel
        params = {"b_team": team, "b_channel": channel}
        row = await self._x.read(lambda c: c.execute(statement, params).first())
        return None if row is None else _target(row)

    async def sessions_of_team(self, team: str) -> list[str]:
        """Every session with replies in workspace `team` (what its uninstall must stop)."""
        statement = select(delivery_targets.c.session_key).where(delivery_targets.c.team == team)
        return await self._x.read(lambda c: list(c.execute(statement).scalars().all()))

    async def active_sessions(self) -> list[str]:
        statement = self._s.active_sessions
        return await self._x.read(lambda c: list(c.execute(statement).scalars().all()))

    async def acquire(self, session_key: str, owner: str, ttl: float, now: float) -> bool:
        """Take (or keep) the right to render this session; False while another holds it."""
        params = {"b_key": session_key, "b_owner": owner, "b_now": now, "b_expires": now + ttl}
        return await self._write(self._s.acquire, params) == 1

    async def release(self, session_key: str, owner: str) -> None:
        await self._write(self._s.release, {"b_key": session_key, "b_owner": owner})

    async def go_idle(self, session_key: str, activity: int) -> bool:
        """Clear `active` unless the session was registered again since `activity` was read."""
        params = {"b_key": session_key, "b_activity": activity}
        return await self._write(self._s.go_idle, params) == 1

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
            "body": post.body.to_json(),
            "opened_at": post.opened_at or now,
            "updated_at": now,
        }
        s = self._s

        def body(conn: Connection) -> Row[Any]:
            conn.execute(s.insert_post, values)
            return conn.execute(s.get_post, {"b_post": post.post_key}).one()

        return _post(await self._x.write(body))

    async def get_post(self, post_key: str) -> Post | None:
        statement = self._s.get_post
        row = await self._x.read(lambda c: c.execute(statement, {"b_post": post_key}).first())
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
        ordered = query.order_by(c.opened_at, c.part)
        rows = await self._x.read(lambda conn: conn.execute(ordered).all())
        return [_post(row) for row in rows]

    async def update_post(self, change: PostUpdate, now: float) -> None:
        statement = self._s.update_post
        await self._x.write(lambda c: _apply(c, statement, change, now))

    async def delete_post(self, post_key: str) -> None:
        await self._write(self._s.delete_post, {"b_post": post_key})

    async def save(
        self, session_key: str, cursor: int, changes: Iterable[PostUpdate], now: float
    ) -> None:
        """Advance the cursor and save post bodies atomically: after a crash, what Slack should
        show for every open post matches exactly the events up to the cursor."""
        s = self._s
        pending = list(changes)

        def body(conn: Connection) -> None:
            for change in pending:
                _apply(conn, s.update_post, change, now)
            conn.execute(s.advance, {"b_key": session_key, "b_cursor": cursor})

        await self._x.write(body)

    # feedback ----------------------------------------------------------------------------

    async def record_feedback(self, feedback: Feedback) -> None:
        """Keep a person's click on an answer's feedback buttons (their latest one wins)."""
        statement = self._s.record_feedback
        values = {
            "session_key": feedback.session_key,
            "turn_id": feedback.turn_id,
            "team": feedback.team,
            "user_id": feedback.user_id,
            "value": feedback.value,
            "clicked_at": feedback.clicked_at,
        }
        await self._x.write(lambda c: c.execute(statement, values), urgent=True)

    async def feedback(self, *, since: float | None = None) -> list[Feedback]:
        """Every answer's feedback, oldest click first; `since`: clicked at or after then."""
        f = slack_feedback.c
        query = select(slack_feedback).order_by(f.clicked_at, f.session_key, f.turn_id)
        if since is not None:
            query = query.where(f.clicked_at >= since)
        rows = await self._x.read(lambda conn: conn.execute(query).all())
        return [Feedback(**dict(row._mapping)) for row in rows]

    # Home tabs ---------------------------------------------------------------------------

    async def note_home_viewer(
        self, team: str, user_id: str, enterprise: str | None, now: float
    ) -> None:
        """This person opened the Home tab: keep their inbox fresh from now on."""
        statement = self._s.note_home_viewer
        values = {"team": team, "user_id": user_id, "enterprise": enterprise, "opened_at": now}
        await self._x.write(lambda c: c.execute(statement, values))

    async def home_viewers(
        self, team: str, users: Iterable[str] | None = None, *, limit: int = 200
    ) -> list[tuple[str, str | None]]:
        """(user, enterprise) of the people of `team` with a Home tab (only `users`, if given),
        the most recent visitors first."""
        v = slack_home_viewers.c
        query = select(v.user_id, v.enterprise).where(v.team == team)
        if users is not None:
            query = query.where(v.user_id.in_(list(users)))
        query = query.order_by(v.opened_at.desc()).limit(limit)
        rows = await self._x.read(lambda conn: conn.execute(query).all())
        return [(str(row[0]), row[1]) for row in rows]

    # retention ---------------------------------------------------------------------------

    async def cursors(self, sessions: Sequence[str]) -> dict[str, int]:
        """How far each session's log has been shown in Slack (sessions with no target are not
        named): what a prune of the engine's events must not pass (`prune_history`)."""
        keys = list(sessions)
        return await self._x.read(lambda c: delivery_prune.cursors(c, keys))

    async def prune_posts(
        self, *, before: float, after: str = "", limit: int = 500, dry_run: bool = False
    ) -> tuple[int, str | None]:
        """One batch: empty the saved bodies of finished reply messages last changed before
        `before` (`storage.delivery.prune` says why nothing else goes); returns how many and
        the `after` to pass next (None: none left)."""
        picked = await self._x.read(lambda c: delivery_prune.picked_posts(c, before, after, limit))
        if not picked:
            return 0, None

        def body(c: Connection) -> int:
            return delivery_prune.strip_bodies(c, picked, before, dry_run)

        stripped = await (self._x.read(body) if dry_run else self._x.write(body))
        return stripped, picked[-1] if len(picked) >= limit else None


def _apply(conn: Connection, statement: Any, change: PostUpdate, now: float) -> None:
    values: dict[str, Any] = {"b_post": change.post_key, "updated_at": now}
    if change.body is not None:
        values["body"] = change.body.to_json()
    if change.state is not None:
        values["state"] = change.state
    if change.ts is not None:
        values["ts"] = change.ts
    if change.mode is not None:
        values["mode"] = change.mode
    conn.execute(statement, values)


def _check_tables(connection: Connection) -> None:
    present = set(inspect(connection).get_table_names())
    missing = sorted({delivery_targets.name, delivery_posts.name} - present)
    if missing:
        raise SchemaMismatchError(
            f"the database has no Slack delivery tables ({', '.join(missing)}; migration "
            f"{DELIVERY_REVISION}); run `bot db upgrade`."
        )


def _registration(
    session_key: str,
    team: str,
    channel: str,
    thread_ts: str | None,
    user_id: str | None,
    now: float,
) -> dict[str, Any]:
    return {
        "session_key": session_key,
        "team": team,
        "channel": channel,
        "thread_ts": thread_ts,
        "user_id": user_id,
        "active": 1,
        "activity": 1,
        "updated_at": now,
    }


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
        body=PostBody.from_json(m["body"]),
        opened_at=float(m["opened_at"]),
    )
