"""With `REDIS_URL` set the bot attaches the Redis dispatcher and serves it, and attaches the
live-event relay (harmless in one process: its own events come back and are dropped); the reply
still streams (both only speed up news between processes, the database stays the record)."""

from __future__ import annotations

from redis.asyncio import Redis

from bot.slack.inbound import session_key
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import eventually, idle, replies

CHANNEL = "C0REDIS"


async def test_bot_with_redis_url_attaches_the_dispatcher(
    db_url, launch, standin, redis_url, redis_prefix
):  # type: ignore[no-untyped-def]
    app = await launch(db_url, AGENT, model(SIMPLE), REDIS_URL=redis_url, REDIS_PREFIX=redis_prefix)
    ts = await app.slack.mention("U0ALICE", "hello?", channel=CHANNEL)
    await eventually(lambda: any("agent." in m.text for m in replies(standin, CHANNEL)))
    await eventually(lambda: idle(standin, CHANNEL))
    assert app.bot._dispatcher is not None
    assert app.bot.runtime._dispatcher is app.bot._dispatcher
    assert app.bot._serving is not None
    assert not app.bot._serving.done()
    assert app.bot._dispatcher.stream == f"{redis_prefix}:turns"
    assert app.bot._relay is not None
    assert app.bot._relay.prefix == f"{redis_prefix}:events:"
    assert app.bot.runtime.hub._relay is app.bot._relay
    turns = await app.turns(session_key("T0DEMO", CHANNEL, ts))
    assert [t.status.value for t in turns] == ["completed"]
    # On the server, not only in the bot's objects: the workers' consumer group exists.
    client = Redis.from_url(redis_url)
    try:
        groups = await client.xinfo_groups(f"{redis_prefix}:turns")
    finally:
        await client.aclose()
    assert [g["name"] for g in groups] == [app.bot._dispatcher.group.encode()]
