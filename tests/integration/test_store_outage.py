"""A database that goes away mid-turn and comes back: the worker that still holds the session's
lease goes on at once, from its last checkpoint, and nothing runs or commits twice.

The outages are real, and nobody else's: on PostgreSQL the worker reaches the shared server
through a TCP proxy of the test's own, which it cuts (new connections refused, open ones reset)
and restores; on SQLite another process takes the database's write lock and holds it past the
store's busy timeout (shortened here from 30 s, so the test does not wait that long), as a backup
or a `sqlite3` shell left in a transaction would. The lease lives 30 s, so a worker that waited
for its own lease to expire could not finish within the bound these tests allow.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from agent import (
    Agent,
    EffectAuthority,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    StoreUnavailableError,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    tool,
)
from agent.seams import Lease, StepCommit, StoreHandle
from storage import MemoryStore, SqlStore
from storage.sql import dialects as sql_dialects
from tests.support.confirmations import turn_and_approve
from tests.support.engine_fixtures import (
    ORDER_AGENT,
    ORDER_SCRIPT,
    RUN_LOG_ENV,
    HookedStore,
    count_orders,
    read_runs,
    record_run,
)
from tests.support.tcp_proxy import TcpProxy

LEASE_TTL = 30.0
OUTAGE = 1.5
"""Seconds the database stays away."""
RESUME_WITHIN = 15.0
"""Seconds after the database's return by which the turn must be done: generous for a busy
machine, and still half of what waiting out the lease would take."""
PASSWORD = "s3cret-pw"
"""In the worker's URL, to show it never reaches an error message (the server trusts anyway)."""

LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
for statement in sys.stdin:
    if statement.strip():
        conn.execute(statement)
conn.execute("COMMIT")
"""
"""Another process holding SQLite's write lock; it runs the statements it is sent under the lock
and lets go when its stdin closes."""


class Outage:
    """The database as the worker sees it: `url` to open, `cut()` and `restore()` it, and
    `steal(session)` to give the session's lease to another worker while the database is away
    from this one."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.returned_at: float | None = None
        self.cuts = 0

    async def cut(self) -> None:
        self.cuts += 1

    async def restore(self) -> None:
        self.returned_at = time.monotonic()

    async def steal(self, session: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        pass


_STEAL = (
    "UPDATE sessions SET lease_owner = 'thief', lease_epoch = lease_epoch + 1, "
    "lease_expires_at = 9999999999 WHERE key = '{session}'"
)


class ProxiedPostgres(Outage):
    def __init__(self, url: str, direct: str, proxy: TcpProxy) -> None:
        super().__init__(url)
        self._direct = direct
        self._proxy = proxy

    @classmethod
    async def open(cls, database_url: str) -> ProxiedPostgres:
        parsed = make_url(database_url)
        proxy = await TcpProxy.start(parsed.host or "127.0.0.1", parsed.port or 5432)
        via_proxy = parsed.set(host="127.0.0.1", port=proxy.port, password=PASSWORD)
        direct = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        return cls(via_proxy.render_as_string(hide_password=False), direct, proxy)

    async def cut(self) -> None:
        await super().cut()
        self._proxy.cut()

    async def restore(self) -> None:
        await self._proxy.restore()
        await super().restore()

    async def steal(self, session: str) -> None:
        async with await psycopg.AsyncConnection.connect(self._direct, autocommit=True) as conn:
            await conn.execute(_STEAL.format(session=session).encode())

    async def close(self) -> None:
        await self._proxy.close()


class LockedSqlite(Outage):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._path = make_url(url).database
        self._holder: asyncio.subprocess.Process | None = None

    async def cut(self) -> None:
        await super().cut()
        self._holder = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            LOCK_HOLDER,
            str(self._path),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert self._holder.stdout is not None
        assert (await self._holder.stdout.readline()).strip() == b"locked"

    async def restore(self) -> None:
        holder, self._holder = self._holder, None
        assert holder is not None
        assert holder.stdin is not None
        holder.stdin.close()
        assert await holder.wait() == 0
        await super().restore()

    async def steal(self, session: str) -> None:
        assert self._holder is not None
        assert self._holder.stdin is not None
        self._holder.stdin.write(_STEAL.format(session=session).encode() + b"\n")
        await self._holder.stdin.drain()

    async def close(self) -> None:
        if self._holder is not None and self._holder.returncode is None:
            self._holder.kill()
            await self._holder.wait()


@pytest.fixture
async def outage(sql_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Outage]:
    opened: Outage
    if sql_url.startswith("sqlite"):
        monkeypatch.setattr(sql_dialects, "SQLITE_BUSY_TIMEOUT_MS", 250)
        opened = LockedSqlite(sql_url)
    else:
        opened = await ProxiedPostgres.open(sql_url)
    try:
        yield opened
    finally:
        await opened.close()


class CutAfter:
    """The worker's store, with the outage started right after the step `label` committed (so
    between two steps), and ended `OUTAGE` seconds later."""

    def __init__(self, inner: SqlStore, label: str, outage: Outage) -> None:
        self._inner = inner
        self._label = label
        self._outage = outage
        self.restored: asyncio.Task[None] | None = None
        self.was_cut = asyncio.Event()
        self.during: Callable[[], Any] | None = None
        """Awaited while the database is away, before it returns."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _after(self, label: str) -> None:
        if label != self._label or self._outage.cuts:
            return
        await self._outage.cut()
        self.restored = asyncio.create_task(self._restore_later())
        self.was_cut.set()

    async def back(self) -> None:
        """Wait until the outage happened and ended."""
        await self.was_cut.wait()
        assert self.restored is not None
        await self.restored

    async def _restore_later(self) -> None:
        await asyncio.sleep(OUTAGE)
        if self.during is not None:
            await self.during()
        await self._outage.restore()

    async def commit(self, lease: Lease, commit: StepCommit, ttl: float, now: float) -> Any:
        out = await self._inner.commit(lease, commit, ttl, now)
        await self._after(HookedStore.label(commit))
        return out

    async def commit_local(
        self,
        lease: Lease,
        run: Callable[[StoreHandle], Any],
        build: Callable[[Any], StepCommit],
        ttl: float,
        now: float,
    ) -> Any:
        labels: list[str] = []

        def build_and_label(value: Any) -> StepCommit:
            commit = build(value)
            labels.append(HookedStore.label(commit))
            return commit

        out = await self._inner.commit_local(lease, run, build_and_label, ttl, now)
        await self._after(labels[0])
        return out


def _runtime(store: Any, model: ScriptedModel, agent: Agent = ORDER_AGENT) -> Runtime:
    return Runtime(
        store,
        model,
        agent=agent,
        lease_ttl=LEASE_TTL,
        recovery_interval=0.5,
        poll_interval=0.05,
    )


async def _finished(store: SqlStore, session: str, turn_id: str) -> TurnStatus:
    """The turn's status once it is finished (polled: `result()` would give up on a store
    call that hits the database before the worker's retry has reconnected)."""
    while True:
        try:
            record = await store.get_turn(session, turn_id)
        except StoreUnavailableError:
            record = None
        if record is not None and record.status.finished:
            return record.status
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("cut_after", ["opening", "tool:1:a", "tool:1:b"])
async def test_a_turn_cut_off_by_a_database_blip_resumes_at_once_and_runs_everything_once(
    outage: Outage,
    cut_after: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    run_log = tmp_path / "runs.log"
    monkeypatch.setenv(RUN_LOG_ENV, str(run_log))
    caplog.set_level(logging.INFO, logger="agent")
    inner = await SqlStore.open(outage.url)
    store = CutAfter(inner, cut_after, outage)
    model = ScriptedModel(ORDER_SCRIPT)
    try:
        async with _runtime(store, model) as rt:
            await rt.session(ORDER_AGENT, "s1").start("Order two mugs.", turn_id="T1")
            await store.back()
            assert outage.returned_at is not None
            status = await asyncio.wait_for(_finished(inner, "s1", "T1"), RESUME_WITHIN)
            resumed_after = time.monotonic() - outage.returned_at
            result = await rt.session(ORDER_AGENT, "s1").result("T1")
        assert status == TurnStatus.COMPLETED, result
        assert result.text == "Ordered 2 mugs."
        assert resumed_after < RESUME_WITHIN
        transcript = await inner.load_transcript("s1")
        assert [m.role for m in transcript] == ["user", "assistant", "tool", "tool", "assistant"]
        assert list(await inner.load_steps("s1", "T1")) == [
            "model:1",
            "tool:1:a",
            "tool:1:b",
            "model:4",
        ]
        events = await inner.read_events("s1")
        assert [(e.seq, e.type) for e in events] == list(
            enumerate(
                [
                    "turn.started",
                    "message.completed",
                    "action.requested",
                    "action.requested",
                    "action.completed",
                    "action.completed",
                    "message.completed",
                    "turn.completed",
                ],
                start=1,
            )
        )
        assert Counter(read_runs(run_log)) == {"lookup_stock": 1, "create_order": 1}
        assert await inner.run_sync(count_orders) == 1
    finally:
        await inner.close()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("database unavailable, retrying" in m for m in messages) == 1, messages
    assert sum("database reachable again" in m for m in messages) == 1, messages
    assert not [m for m in messages if PASSWORD in m]


async def test_a_worker_whose_lease_was_taken_during_the_blip_backs_off(
    outage: Outage, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent")
    inner = await SqlStore.open(outage.url)
    store = CutAfter(inner, "opening", outage)
    store.during = lambda: outage.steal("s1")
    model = ScriptedModel(ORDER_SCRIPT)
    try:
        async with _runtime(store, model) as rt:
            await rt.session(ORDER_AGENT, "s1").start("Order two mugs.", turn_id="T1")
            await store.back()
            asked = len(model.requests)

            async def backed_off() -> None:
                while True:
                    if any("lost the lease on s1" in r.getMessage() for r in caplog.records):
                        return
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(backed_off(), RESUME_WITHIN)
            await asyncio.sleep(0.5)  # a few retry and sweep rounds: nothing more happens
            assert len(model.requests) == asked
        session = await inner.get_session("s1")
        assert session is not None
        assert session.lease_owner == "thief"
        assert [m.role for m in await inner.load_transcript("s1")] == ["user"]
        assert [e.type for e in await inner.read_events("s1")] == ["turn.started"]
    finally:
        await inner.close()


async def test_a_store_call_while_the_database_is_away_raises_store_unavailable(
    outage: Outage,
) -> None:
    store = await SqlStore.open(outage.url)
    try:
        await outage.cut()
        try:
            with pytest.raises(StoreUnavailableError) as raised:
                await store.acquire_lease("elsewhere", "probe", LEASE_TTL, time.time())
        finally:
            await outage.restore()
        message = str(raised.value)
        assert "\n" not in message
        assert PASSWORD not in message
        assert "[SQL" not in message
        assert "parameters" not in message
        assert "cannot reach the database" in message
        assert make_url(outage.url).render_as_string(hide_password=True) in message

        async def reachable() -> None:
            while True:
                try:
                    await store.acquire_lease("elsewhere", "probe", LEASE_TTL, time.time())
                    return
                except StoreUnavailableError:
                    await asyncio.sleep(0.1)

        await asyncio.wait_for(reachable(), RESUME_WITHIN)
    finally:
        await store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("sql_database", ["postgres"], indirect=True)
async def test_a_local_tool_whose_connection_drops_runs_again_and_writes_once(
    outage: Outage, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection goes while the local tool is inside its step's transaction: its write is
    rolled back with the step, the model never sees the driver's error as the tool's, and the
    tool runs again once the database is back, its write landing once."""
    run_log = tmp_path / "runs.log"
    monkeypatch.setenv(RUN_LOG_ENV, str(run_log))
    loop = asyncio.get_running_loop()
    blips: list[asyncio.Task[None]] = []
    blipping = asyncio.Event()

    async def blip(cut: threading.Event) -> None:
        await outage.cut()
        cut.set()
        await asyncio.sleep(OUTAGE)
        await outage.restore()

    def begin_blip(cut: threading.Event) -> None:
        blips.append(asyncio.create_task(blip(cut)))
        blipping.set()

    @tool
    def place_order(item: str, ctx: ToolContext) -> dict[str, Any]:
        """Place an order through the store handle."""
        record_run("place_order")
        conn: Connection = ctx.store.unwrap()
        conn.execute(text("create table if not exists test_orders (item text, quantity integer)"))
        if not outage.cuts:
            cut = threading.Event()
            loop.call_soon_threadsafe(begin_blip, cut)
            assert cut.wait(10)
        conn.execute(text("insert into test_orders values (:i, 1)"), {"i": item})
        return {"ordered": item}

    agent = Agent(name="orders", instructions="Place orders.", tools=[place_order])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="a", name="place_order", input={"item": "mug"})]),
            ScriptedReply(text="Ordered."),
        ]
    )
    store = await SqlStore.open(outage.url)
    try:
        async with _runtime(store, model, agent) as rt:
            await rt.session(agent, "s1").start("Order a mug.", turn_id="T1")
            await blipping.wait()
            await blips[0]
            assert outage.returned_at is not None
            status = await asyncio.wait_for(_finished(store, "s1", "T1"), RESUME_WITHIN)
        assert status == TurnStatus.COMPLETED
        transcript = await store.load_transcript("s1")
        assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
        result = transcript[2]
        assert isinstance(result, ToolMessage)
        assert (result.is_error, result.result) == (False, {"ordered": "mug"})
        assert read_runs(run_log) == ["place_order", "place_order"]
        assert await store.run_sync(count_orders) == 1
    finally:
        await store.close()


class _UnreachableOnce:
    """A store whose first `prepare_receipt` meets an unreachable database."""

    def __init__(self, inner: MemoryStore) -> None:
        self._inner = inner
        self.failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def prepare_receipt(self, *args: Any, **kwargs: Any) -> Any:
        if not self.failed:
            self.failed = True
            raise StoreUnavailableError("cannot reach the database memory: gone for a moment")
        return await self._inner.prepare_receipt(*args, **kwargs)


async def test_a_store_outage_met_inside_a_remote_tool_is_not_the_tools_error() -> None:
    """`run_effect` inside a remote tool cannot reach the store: nothing was sent, and that is
    no error of the tool's for the model to read. The turn waits and runs the tool again."""
    sent: list[str] = []

    @tool(effect="write", confirmation="required")
    async def reserve(sku: str, ctx: ToolContext) -> dict[str, Any]:
        """Reserve a part."""

        async def call(authority: EffectAuthority) -> Any:
            sent.append(authority.idempotency_key)
            return {"reserved": sku}

        effect = await ctx.run_effect(sku, call)
        return {"reservation": effect.value}

    agent = Agent(name="parts", instructions="Reserve parts.", tools=[reserve])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="a", name="reserve", input={"sku": "x-1"})]),
            ScriptedReply(text="Reserved."),
        ]
    )
    inner = MemoryStore()
    store = _UnreachableOnce(inner)
    async with Runtime(store, model, agent=agent, recovery_interval=0.5, poll_interval=0.05) as rt:
        session = rt.session(agent, "s1")
        result = await asyncio.wait_for(turn_and_approve(session, "Reserve x-1."), 30)
    assert store.failed
    assert result.status == TurnStatus.COMPLETED
    tool_message = [m for m in await inner.load_transcript("s1") if isinstance(m, ToolMessage)][-1]
    assert isinstance(tool_message, ToolMessage)
    assert (tool_message.is_error, tool_message.result) == (
        False,
        {"reservation": {"reserved": "x-1"}},
    )
    assert sent == ["reserve:x-1"]
