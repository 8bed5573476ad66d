"""The Redis relay reports how late live events arrive: from the sender's stamp in the message to
its receipt in this process, to the callback the bot turns into `bot_redis_relay_lag_seconds`."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.asyncio import Redis

from agent import Agent, Runtime, ScriptedModel, TurnEvent
from agent.seams import MessageDelta
from bot.core.metrics import BotMetrics
from storage import MemoryStore
from storage.redis.events import RedisEventRelay
from storage.redis.live_wire import encode
from tests.bot.harness import eventually

pytestmark = pytest.mark.redis

SESSION = "lag:s1"


async def test_lag_is_measured_from_the_senders_stamp(redis_url: str, redis_prefix: str) -> None:
    metrics = BotMetrics()
    agent = Agent(name="lag", instructions="x")
    prefix = f"{redis_prefix}:events:"
    sender_rt = Runtime(MemoryStore(), ScriptedModel([]), agent=agent, run_turns=False)
    receiver_rt = Runtime(MemoryStore(), ScriptedModel([]), agent=agent, run_turns=False)
    sender = RedisEventRelay(redis_url, prefix=prefix)
    receiver = RedisEventRelay(redis_url, prefix=prefix, on_lag=metrics.relay_lagged)
    got: list[TurnEvent] = []
    raw = Redis.from_url(redis_url)
    try:
        sender.attach(sender_rt)
        receiver.attach(receiver_rt)
        await receiver_rt.session(agent, SESSION).observe(got.append)
        async with asyncio.timeout(10):
            await receiver.wait_watching(SESSION)

        # A message stamped five seconds ago, as a sender whose clock runs behind would send it.
        late = MessageDelta(session=SESSION, turn_id="T1", text="late", after=1)
        [data] = encode(late, origin="elsewhere", sent_at=time.time() - 5.0)
        await raw.publish(receiver.channel(SESSION), data)
        # And one through the sending relay, as another process's turn publishes it.
        sender.publish(MessageDelta(session=SESSION, turn_id="T1", text="now"))

        await eventually(
            lambda: metrics.registry.get_sample_value("bot_redis_relay_lag_seconds_count") == 2,
            within=10,
            what="both messages received",
        )
    finally:
        await raw.aclose()
        await sender.close()
        await receiver.close()
        await sender_rt.close()
        await receiver_rt.close()

    get = metrics.registry.get_sample_value
    assert get("bot_redis_relay_lag_seconds_count") == 2
    assert get("bot_redis_relay_lag_seconds_sum") >= 5.0
    assert get("bot_redis_relay_lag_seconds_bucket", {"le": "2.5"}) == 1  # the fresh one
    assert get("bot_redis_relay_lag_seconds_bucket", {"le": "+Inf"}) == 2


async def test_a_failing_callback_costs_only_its_number(redis_url: str, redis_prefix: str) -> None:
    def broken(seconds: float) -> None:
        raise RuntimeError("broken meter")

    agent = Agent(name="lag", instructions="x")
    prefix = f"{redis_prefix}:events:"
    rt = Runtime(MemoryStore(), ScriptedModel([]), agent=agent, run_turns=False)
    relay = RedisEventRelay(redis_url, prefix=prefix, on_lag=broken)
    got: list[TurnEvent] = []
    raw = Redis.from_url(redis_url)
    try:
        relay.attach(rt)
        await rt.session(agent, SESSION).observe(got.append)
        async with asyncio.timeout(10):
            await relay.wait_watching(SESSION)
        [data] = encode(
            MessageDelta(session=SESSION, turn_id="T1", text="x", after=1),
            origin="elsewhere",
            sent_at=time.time(),
        )
        await raw.publish(relay.channel(SESSION), data)
        await eventually(lambda: got, within=10, what="the message relayed")
    finally:
        await raw.aclose()
        await relay.close()
        await rt.close()
    assert [e.text for e in got if isinstance(e, MessageDelta)] == ["x"]
