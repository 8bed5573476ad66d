"""The long-running commands: `bot serve` (HTTP), `bot socket` (Socket Mode), `bot clock`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

import uvicorn
from starlette.applications import Starlette

from bot.app import SlackBot, open_bot, serving_app
from bot.core.clock import Clock
from bot.core.gc_tuning import freeze_startup_heap
from bot.core.logs import setup_logging
from bot.core.metrics_multiprocess import multiprocess_metrics
from bot.core.ops_server import ops_serving
from bot.core.retention import Retention
from bot.core.settings import Settings
from bot.core.tracing import install_tracing, traced

log = logging.getLogger(__name__)

SHUTDOWN_GRACE_SECONDS = 10
"""How long a stopping web process lets requests in flight finish. Without a bound uvicorn
waits for every one, and an API event stream never ends by itself: a deploy would hang. Past
it they are cancelled (a stream's client reconnects with `Last-Event-ID`; a turn a waiting
POST started goes on, durably, and can be polled)."""


def serve(settings: Settings) -> int:
    """HTTP mode: Starlette on uvicorn, Slack posting to `/slack/events`, in `WEB_CONCURRENCY`
    processes.

    The bot is opened once here first, so a database below this code's schema or an agent that
    does not assemble fails the command (exit 2, naming the fix) instead of a server process.
    """
    agent = asyncio.run(_preflight(settings))
    log.info(
        "serving",
        extra={"port": settings.port, "agent": agent, "processes": settings.web_concurrency},
    )
    with multiprocess_metrics(settings.web_concurrency):  # one scrape sums the processes
        run_web(
            "bot.cli.commands:web_app",
            host=settings.host,
            port=settings.port,
            processes=settings.web_concurrency,
        )
    return 0


def web_app() -> Starlette:
    """uvicorn's app factory, called in every web process: settings come from the environment,
    as they did for `bot serve`, and each process opens its own bot when it starts serving."""
    settings = Settings()
    setup_logging(level=settings.log_level, fmt=settings.log_format, secrets=settings.secrets())
    install_tracing()  # flushed when the process exits

    async def opener() -> SlackBot:
        return await open_bot(settings)

    return serving_app(opener, freeze_heap=True)


def run_web(factory: str, *, host: str, port: int, processes: int = 1) -> None:
    """Serve the app that `factory` (`module:function`) makes, in `processes` processes.

    uvicorn's choice of loop and parser is used, uvloop and httptools where installed: the
    pure-Python parser (h11) and the standard loop cost about 0.4 ms more CPU per request (HTTP
    alone is about 0.5 ms with them), and the loop also speeds up every database round trip of
    an ack. Several processes share one listening socket; uvicorn restarts one that dies.
    """
    uvicorn.run(
        factory,
        factory=True,
        host=host,
        port=port,
        workers=processes,
        loop="auto",
        http="auto",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )


async def _preflight(settings: Settings) -> str:
    bot = await open_bot(settings)
    await bot.close()
    return bot.agent.name


@traced
async def socket_mode(settings: Settings) -> int:
    """Socket Mode: Slack pushes events over a websocket; no public URL needed
    (`bot.slack.socket_mode`).

    A token Slack refuses, before anything starts, or Socket Mode turned off in the app's
    settings later, ends the command (exit 2) with one line saying which.
    """
    from bot.slack.socket_mode import SocketModeConnection, SocketModeError, run_socket_mode

    bot = await open_bot(settings)
    app_token = settings.slack_app_token
    assert app_token is not None
    stop = asyncio.Event()
    _on_signals(stop)
    try:
        async with ops_serving(bot, host=settings.metrics_host, port=settings.metrics_port):
            await run_socket_mode(
                bot,
                SocketModeConnection(bot, app_token.get_secret_value()),
                stop,
                connected=freeze_startup_heap,
            )
    except SocketModeError as err:
        print(f"bot socket: {err}", file=sys.stderr)
        return 2
    return 0


@traced
async def clock(settings: Settings) -> int:
    """Fire the agent's schedules; turns run and render in this process (or any other)."""
    bot: SlackBot = await open_bot(settings)
    await bot.start()
    freeze_startup_heap()
    try:
        ticker = Clock(
            runtime=bot.runtime,
            agent=bot.agent,
            delivery=bot.delivery,
            renderers=bot.renderers,
            team=await clock_team(bot, settings),
            grace=settings.cron_grace,
            retention=Retention.from_settings(settings),
        )
        log.info("clock running", extra={"schedules": len(bot.agent.schedules)})
        stop = asyncio.Event()
        _on_signals(stop)
        async with ops_serving(bot, host=settings.metrics_host, port=settings.metrics_port):
            await ticker.run(stop)
    finally:
        await bot.close()
    return 0


async def clock_team(bot: SlackBot, settings: Settings) -> str | None:
    """The workspace the schedules post in: the bot token's (`auth.test`), or with installs in
    many workspaces `SLACK_CLOCK_TEAM` (None: no schedule fires; requests still expire)."""
    if settings.oauth:
        if settings.slack_clock_team is None and bot.agent.schedules:
            log.warning("SLACK_CLOCK_TEAM is unset: the agent's schedules do not fire")
        return settings.slack_clock_team
    auth = await bot.client.auth_test()
    return str(auth["team_id"])


@traced
async def worker(settings: Settings) -> int:
    """Run and render the turns web processes queued (`RUN_TURNS=false` on the web side)."""
    bot = await open_bot(settings.model_copy(update={"run_turns": True}), worker=True)
    await bot.start()
    freeze_startup_heap()
    log.info("worker running", extra={"agent": bot.agent.name, "owner": bot.owner})
    try:
        async with ops_serving(bot, host=settings.metrics_host, port=settings.metrics_port):
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
