"""What an operator command works on: the engine's store and the Slack delivery tables of the
database at `DATABASE_URL`, and, for the commands that act (`bot cancel`, `bot reset`), a
`Runtime` over that store which runs no turns.

That runtime only makes the engine's own calls (`session.stop`, `cancel`, `reset`), committed
before they return, exactly as Slack's Stop button or `/agent-reset` make them; whichever worker
holds the session (another process) hears of it by its lease heartbeat, or at once through Redis
when `REDIS_URL` is set, and the renderer of the bot process shows it in the thread once woken
(`DeliveryStore.mark_active`, the durable flag its sweep reads, as `bot/app.py` wakes it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from agent import Agent, Runtime, ScriptedModel
from bot.cli.operator.output import OperatorError
from storage import SqlStore
from storage.delivery.store import DeliveryStore

OPERATOR_AGENT = Agent(name="bot-operator", instructions="Operator commands run no turns.")
"""The sessions' handle needs an agent; this runtime never runs a turn, so never asks it."""


@dataclass(frozen=True, kw_only=True)
class Databases:
    store: SqlStore
    delivery: DeliveryStore

    async def require_session(self, key: str) -> None:
        """A session the engine knows, else the one-line usage error."""
        if not key or await self.store.get_session(key) is None:
            raise OperatorError(f"no session {key!r} in the database")

    async def wake_renderer(self, key: str) -> bool:
        """Flag the thread as having something to show (the bot's render sweep picks it up);
        False for a session with no Slack thread."""
        if await self.delivery.get_target(key) is None:
            return False
        await self.delivery.mark_active(key, time.time())
        return True


@contextlib.asynccontextmanager
async def databases(url: str) -> AsyncIterator[Databases]:
    store = await SqlStore.open(url)  # names `bot db upgrade` for a schema below this code
    try:
        delivery = await DeliveryStore.open(url, store=store)
        try:
            yield Databases(store=store, delivery=delivery)
        finally:
            await delivery.close()
    finally:
        await store.close()


@contextlib.asynccontextmanager
async def acting_runtime(
    store: SqlStore, redis_url: str | None, prefix: str
) -> AsyncIterator[Runtime]:
    """A runtime that only makes durable calls (`run_turns=False`, no sweep): with Redis, the
    cancel signals reach the worker running the turn at once; without, its heartbeat reads the
    durable request (every third of the lease, 10 s by default)."""
    # A scripted model with nothing to say: a runtime that runs no turns never asks it.
    runtime = Runtime(store, ScriptedModel(), agent=OPERATOR_AGENT, run_turns=False)
    dispatcher = None
    if redis_url:
        from storage.redis.dispatch import RedisDispatcher

        dispatcher = RedisDispatcher(
            redis_url,
            stream=f"{prefix}:turns",
            group=f"{prefix}:workers",
            channel=f"{prefix}:cancel",
        )
        runtime.attach(dispatcher)
    try:
        yield runtime
    finally:
        await runtime.close()  # sends what is still on its way to the dispatcher first
        if dispatcher is not None:
            await dispatcher.close()
