"""The long-running commands: `bot serve` (HTTP), `bot socket` (Socket Mode), `bot clock`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import uvicorn

from bot.app import SlackBot, open_bot
from bot.clock import Clock
from bot.settings import Settings

log = logging.getLogger(__name__)


async def serve(settings: Settings) -> int:
    """HTTP mode: Starlette on uvicorn, Slack posting to `/slack/events`."""
    bot = await open_bot(settings)
    config = uvicorn.Config(
        bot.http_app(), host=settings.host, port=settings.port, log_config=None, access_log=False
    )
    log.info("serving", extra={"port": settings.port, "agent": bot.agent.name})
    await uvicorn.Server(config).serve()
    return 0


async def socket_mode(settings: Settings) -> int:
    """Socket Mode: Slack pushes events over a websocket; no public URL needed."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

    bot = await open_bot(settings)
    app_token = settings.slack_app_token
    assert app_token is not None
    handler = AsyncSocketModeHandler(bot.bolt, app_token.get_secret_value(), web_client=bot.client)
    await bot.start()
    try:
        await handler.connect_async()
        log.info("connected in socket mode", extra={"agent": bot.agent.name})
        await _until_signalled()
    finally:
        await handler.close_async()
        await bot.close()
    return 0


async def clock(settings: Settings) -> int:
    """Fire the agent's schedules; turns run and render in this process (or any other)."""
    bot: SlackBot = await open_bot(settings)
    await bot.start()
    try:
        auth = await bot.client.auth_test()
        ticker = Clock(
            runtime=bot.runtime,
            agent=bot.agent,
            delivery=bot.delivery,
            renderers=bot.renderers,
            team=str(auth["team_id"]),
            grace=settings.cron_grace,
        )
        log.info("clock running", extra={"schedules": len(bot.agent.schedules)})
        stop = asyncio.Event()
        _on_signals(stop)
        await ticker.run(stop)
    finally:
        await bot.close()
    return 0


async def worker(settings: Settings) -> int:
    """Run and render the turns web processes queued (`RUN_TURNS=false` on the web side)."""
    bot = await open_bot(settings.model_copy(update={"run_turns": True}), worker=True)
    await bot.start()
    log.info("worker running", extra={"agent": bot.agent.name, "owner": bot.owner})
    try:
        await _until_signalled()
    finally:
        await bot.close()
    return 0


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)


async def _until_signalled() -> None:
    stop = asyncio.Event()
    _on_signals(stop)
    await stop.wait()
