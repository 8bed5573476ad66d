"""`RedisDispatcher` against a real Redis, with a queue-only "web" runtime and a "worker" runtime
on SQLite and PostgreSQL: dispatch through the stream, cancellation through pub/sub, reclaiming a
dead consumer's entry, and Redis dying mid-run (the database sweep carries on, nothing raises).

The worker's recovery sweep and lease heartbeat are slowed to an hour wherever the point is that
Redis delivered something, and a probe counts the sweeps, so polling cannot pass for dispatch.

Redis comes from `BOT_TEST_REDIS_URL` (default `redis://127.0.0.1:6379/0`); each test uses its
own key prefix and deletes its stream. Unreachable → the test fails, saying so; with
`BOT_TEST_SKIP_REDIS=1` it is skipped instead, except under `BOT_TEST_REQUIRE_SERVICES=1` (CI).
The outage test runs a private `redis-server` (from PATH) that it SIGKILLs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    tool,
)
from storage import MemoryStore, SqlStore
from storage.redis.dispatch import RedisDispatcher, redact
from tests.support.private_services import PrivateRedis, free_port

pytestmark = pytest.mark.redis

HOUR = 3600.0
WITHIN = 60.0
"""How long a test waits for what Redis delivers: generous, for a busy machine. Whether it was
Redis that delivered is shown by counts (sweeps, a cancel the tool saw), never by timing."""
GIVE_UP = 2 * WITHIN
LOGGER = "storage.redis.dispatch"


async def eventually(
    check: Callable[[], Awaitable[Any]], *, until: Any, within: float = WITHIN
) -> None:
    """Poll `check()` until it returns `until`."""
    async with asyncio.timeout(within):
        while True:
            if await check() == until:
                return
            await asyncio.sleep(0.02)


# -- Redis fixtures (`redis_url`, `redis_prefix`: tests/support/redis_fixtures.py) ------------


@pytest.fixture
def names(redis_prefix: str) -> dict[str, str]:
    """This test's own stream, group and channel."""
    return {
        "stream": f"{redis_prefix}:turns",
        "group": f"{redis_prefix}:workers",
        "channel": f"{redis_prefix}:cancel",
    }


@pytest.fixture
async def raw(redis_url: str, names: dict[str, str]) -> AsyncIterator[Redis]:
    """A plain client for looking at this test's keys; every test on the shared server takes it,
    so its stream is deleted afterwards."""
    client = Redis.from_url(redis_url, decode_responses=True)
    try:
        yield client
    finally:
        await client.delete(names["stream"])
        await client.aclose()


# -- runtimes ---------------------------------------------------------------------------------


class SweepProbe:
    """The worker's store, counting recovery sweeps (so a test knows polling did not run)."""

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self.sweeps = 0
        self.swept = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def recoverable_sessions(self, now: float) -> list[str]:
        found = await self._inner.recoverable_sessions(now)
        self.sweeps += 1
        self.swept.set()
        return found


class Worker:
    """A worker process in miniature: its own store, runtime and dispatcher."""

    def __init__(
        self, store: Any, agent: Agent, model: Any, dispatcher: RedisDispatcher, **kw: Any
    ) -> None:
        self.probe = SweepProbe(store)
        kw.setdefault("recovery_interval", HOUR)
        self.runtime = Runtime(self.probe, model, agent=agent, poll_interval=0.02, **kw)  # type: ignore[arg-type]
        self.dispatcher = dispatcher
        self.serving: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Worker:
        self.runtime.start_recovery()
        async with asyncio.timeout(WITHIN):
            await self.probe.swept.wait()  # the startup sweep is over before any turn exists
        return self

    async def serve(self) -> None:
        self.runtime.attach(self.dispatcher)
        self.serving = asyncio.create_task(self.dispatcher.serve(self.runtime))
        async with asyncio.timeout(WITHIN):
            await self.dispatcher.wait_ready()

    async def __aexit__(self, *exc: object) -> None:
        await self.dispatcher.close()
        if self.serving is not None:
            await self.serving
        await self.runtime.close()


@contextlib.asynccontextmanager
async def web(store: SessionStore, agent: Agent, dispatcher: RedisDispatcher) -> AsyncIterator[Any]:
    """A queue-only runtime (a web process): it never runs a turn, it only tells workers."""
    runtime = Runtime(store, ScriptedModel([]), agent=agent, run_turns=False, poll_interval=0.02)
    runtime.attach(dispatcher)
    try:
        yield runtime.session(agent, "s1")
    finally:
        await runtime.close()
        await dispatcher.close()


@contextlib.asynccontextmanager
async def two_stores(url: str) -> AsyncIterator[tuple[SqlStore, SqlStore]]:
    """The web's and the worker's own connections to one database, as two processes would."""
    async with contextlib.AsyncExitStack() as stack:
        web_store = await SqlStore.open(url)
        stack.push_async_callback(web_store.close)
        worker_store = await SqlStore.open(url)
        stack.push_async_callback(worker_store.close)
        yield web_store, worker_store


def _waiting_agent(started: asyncio.Event) -> Agent:
    """`started` is set once both calls of `WAIT_TWICE` are running (side by side)."""
    running: list[None] = []

    @tool
    async def wait_for_cancel(ctx: ToolContext) -> str:
        """Works until told to stop; gives up after far longer than the test waits for its
        result, so only a cancel that reached it lets the test pass."""
        running.append(None)
        if len(running) == len(WAIT_TWICE.tool_calls):
            started.set()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(GIVE_UP):
                await ctx.cancellation.wait()
        return "stopped" if ctx.cancellation.cancelled else "gave up"

    return Agent(name="a", instructions="x", tools=[wait_for_cancel])


WAIT_TWICE = ScriptedReply(
    tool_calls=[
        ToolCall(id="a", name="wait_for_cancel", input={}),
        ToolCall(id="b", name="wait_for_cancel", input={}),
    ]
)


# -- tests ------------------------------------------------------------------------------------


async def test_a_queued_turn_reaches_a_worker_through_the_stream(
    sql_url: str, redis_url: str, names: dict[str, str], raw: Redis
) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel([ScriptedReply(text="hello")])
    async with (
        two_stores(sql_url) as (web_store, worker_store),
        Worker(worker_store, agent, model, RedisDispatcher(redis_url, **names)) as worker,
        web(web_store, agent, RedisDispatcher(redis_url, **names)) as session,
    ):
        await worker.serve()
        await session.start("hi", turn_id="T1")
        async with asyncio.timeout(WITHIN):
            result = await session.result("T1")

    assert (result.status, result.text) == (TurnStatus.COMPLETED, "hello")
    assert worker.probe.sweeps == 1, "only the startup sweep ran (the next is an hour away)"
    assert await raw.xlen(names["stream"]) == 1
    assert (await raw.xpending(names["stream"], names["group"]))["pending"] == 0


async def test_a_cancel_reaches_the_running_turn_through_pubsub(
    sql_url: str,
    redis_url: str,
    names: dict[str, str],
    raw: Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = asyncio.Event()
    agent = _waiting_agent(started)
    model = ScriptedModel([WAIT_TWICE, ScriptedReply(text="never")])
    async with (
        two_stores(sql_url) as (web_store, worker_store),
        Worker(
            worker_store, agent, model, RedisDispatcher(redis_url, **names), heartbeat_interval=HOUR
        ) as worker,
        web(web_store, agent, RedisDispatcher(redis_url, **names)) as session,
    ):
        await worker.serve()
        await session.start("work", turn_id="T1")
        async with asyncio.timeout(WITHIN):
            await started.wait()  # both calls run side by side
        await raw.publish(names["channel"], "not json")  # garbage must not kill the listener
        assert await session.cancel("T1", "user changed their mind")
        async with asyncio.timeout(WITHIN):
            result = await session.result("T1")
        transcript = await web_store.load_transcript("s1")

    assert (result.status, result.reason) == (TurnStatus.CANCELLED, "user changed their mind")
    assert len(model.requests) == 1, "no model call after the cancel"
    results = sorted((m.call_id, m.result) for m in transcript if isinstance(m, ToolMessage))
    assert results == [("a", "stopped"), ("b", "stopped")], (
        "the signal reached both calls (by the heartbeat it would take an hour)"
    )
    assert worker.probe.sweeps == 1
    assert "ignoring malformed cancel signal" in caplog.text


async def test_replace_cancels_through_redis_and_keeps_the_new_turn(
    sql_url: str, redis_url: str, names: dict[str, str], raw: Redis
) -> None:
    started = asyncio.Event()
    agent = _waiting_agent(started)
    model = ScriptedModel(
        by_opening={"first": [WAIT_TWICE], "second": [ScriptedReply(text="second")]}
    )
    async with (
        two_stores(sql_url) as (web_store, worker_store),
        Worker(
            worker_store, agent, model, RedisDispatcher(redis_url, **names), heartbeat_interval=HOUR
        ) as worker,
        web(web_store, agent, RedisDispatcher(redis_url, **names)) as session,
    ):
        await worker.serve()
        await session.start("first", turn_id="T1")
        async with asyncio.timeout(WITHIN):
            await started.wait()
        await session.start("second", turn_id="T2", replace=True)
        async with asyncio.timeout(WITHIN):
            first, second = await session.result("T1"), await session.result("T2")

    assert (first.status, first.reason) == (TurnStatus.CANCELLED, "replaced")
    assert (second.status, second.text) == (TurnStatus.COMPLETED, "second")
    assert worker.probe.sweeps == 1


async def test_an_entry_a_dead_consumer_never_acknowledged_is_reclaimed(
    sql_url: str, redis_url: str, names: dict[str, str], raw: Redis
) -> None:
    agent = Agent(name="a", instructions="x")
    model = ScriptedModel([ScriptedReply(text="rescued")])
    stream, group = names["stream"], names["group"]
    dispatcher = RedisDispatcher(redis_url, **names, claim_idle=0.3, claim_interval=0.1)
    async with (
        two_stores(sql_url) as (web_store, worker_store),
        Worker(worker_store, agent, model, dispatcher) as worker,
        web(web_store, agent, RedisDispatcher(redis_url, **names)) as session,
    ):
        await raw.xgroup_create(stream, group, id="0", mkstream=True)
        await session.start("hi", turn_id="T1")
        await eventually(lambda: raw.xlen(stream), until=1)  # the web's notice is in
        # A consumer reads the entry and dies before acknowledging it.
        taken = await raw.xreadgroup(group, "dead-consumer", {stream: ">"}, count=10)
        assert [len(entries) for _, entries in taken] == [1]
        assert (await raw.xpending(stream, group))["consumers"] == [
            {"name": "dead-consumer", "pending": 1}
        ]

        await worker.serve()
        async with asyncio.timeout(WITHIN):
            result = await session.result("T1")

    assert (result.status, result.text) == (TurnStatus.COMPLETED, "rescued")
    assert worker.probe.sweeps == 1, "the sweep did not find it"
    assert (await raw.xpending(stream, group))["pending"] == 0


async def test_redis_dying_mid_run_loses_nothing_and_raises_nothing(
    sql_url: str,
    names: dict[str, str],
    private_redis: PrivateRedis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    agent = Agent(name="a", instructions="x")
    texts = {"1": "one", "2": "two", "3": "three"}
    model = ScriptedModel(by_opening={k: [ScriptedReply(text=v)] for k, v in texts.items()})
    url = private_redis.url
    fast = {"retry_min": 0.05, "retry_max": 0.3}
    async with (
        two_stores(sql_url) as (web_store, worker_store),
        Worker(
            worker_store, agent, model, RedisDispatcher(url, **names, **fast), recovery_interval=0.3
        ) as worker,
        web(web_store, agent, RedisDispatcher(url, **names)) as session,
    ):
        await worker.serve()
        assert (await session.turn("1", turn_id="T1")).text == "one"

        await asyncio.to_thread(private_redis.kill)
        async with asyncio.timeout(WITHIN):
            await session.start("2", turn_id="T2")  # returns: the turn is in the database
            result = await session.result("T2")
        assert (result.status, result.text) == (TurnStatus.COMPLETED, "two")
        assert worker.serving is not None
        assert not worker.serving.done(), "serve keeps trying"

        # Redis comes back empty: the worker reconnects, recreates its group, consumes again.
        await asyncio.to_thread(private_redis.start)
        await session.start("3", turn_id="T3")
        checker = Redis.from_url(url, decode_responses=True)

        async def consumed() -> bool:
            """The worker's group has delivered the newest entry, and it was acknowledged."""
            if not await checker.exists(names["stream"]):
                return False  # neither the web's XADD nor the worker's MKSTREAM yet
            groups = await checker.xinfo_groups(names["stream"])
            last = await checker.xrevrange(names["stream"], count=1)
            return bool(
                groups
                and last
                and groups[0]["last-delivered-id"] == last[0][0]
                and groups[0]["pending"] == 0
            )

        try:
            await eventually(consumed, until=True)
        finally:
            await checker.aclose()
        async with asyncio.timeout(WITHIN):
            assert (await session.result("T3")).text == "three"

    mine = [r for r in caplog.records if r.name == LOGGER]
    warnings = [r for r in mine if r.levelno == logging.WARNING]
    assert warnings, "the outage was logged"
    assert all("unavailable" in r.getMessage() and r.exc_info is None for r in warnings)
    assert any("reachable again" in r.getMessage() for r in mine)
    assert private_redis.password not in caplog.text
    assert "dispatcher unavailable" not in caplog.text, "nothing reached the runtime's guard"
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_no_redis_at_all_warns_once_and_close_still_returns(
    names: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    url = f"redis://user:hunter2@127.0.0.1:{free_port()}/0"
    dispatcher = RedisDispatcher(url, **names, retry_min=0.05, retry_max=0.1)
    runtime = Runtime(MemoryStore(), ScriptedModel([]), agent=Agent(name="a", instructions="x"))
    async with dispatcher:
        serving = asyncio.create_task(dispatcher.serve(runtime))
        await dispatcher.queued("s1")
        await dispatcher.cancel("s1", "stop", only="T1")
        await asyncio.sleep(0.3)  # a few reconnect attempts
        assert not serving.done()
    async with asyncio.timeout(WITHIN):
        await serving  # close() made it return
    await runtime.close()

    warnings = [r for r in caplog.records if r.name == LOGGER and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "redis://user:***@127.0.0.1" in warnings[0].getMessage()
    assert "hunter2" not in caplog.text


def test_redact_hides_passwords_in_both_places() -> None:
    assert redact("redis://:s3cret@h:6379/0") == "redis://:***@h:6379/0"
    assert redact("rediss://u:p%40ss@h/1") == "rediss://u:***@h/1"
    assert (
        redact("unix:///tmp/r.sock?db=0&password=s3cret") == "unix:///tmp/r.sock?db=0&password=***"
    )
    assert redact("redis://h:6379") == "redis://h:6379"
