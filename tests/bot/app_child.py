"""The bot as a separate process, for crash tests: serves HTTP on a free port (printed as
`PORT <n>`), and with `--crash stage:label` announces `AT stage:label` at that commit boundary
and waits there to be SIGKILLed.

`--role`: `one` is `bot serve` running the turns; `web` is `bot serve` with `RUN_TURNS=false`;
`worker` is `bot worker` (no HTTP: it prints `PORT 0` once it is running); `socket` is `bot
socket` (`SLACK_APP_TOKEN` from the environment; it prints `PORT 0` once connected), and with
`--crash before-ack` it announces `AT before-ack` when its first envelope has been dispatched and
waits there, unacknowledged, to be SIGKILLed; with `--crash enqueue-fails` the database fails
the first turn it is asked to queue (it announces `AT enqueue-failed`) and works from then on.

    python -m tests.bot.app_child DATABASE_URL SLACK_API_URL SCRIPT [--crash after:model:1]
        [--role one|web|worker] [--agent AGENT] [--lease-ttl 1.0] [--timing fast|production]

`REDIS_URL` in the environment gives it a Redis dispatcher, as it does `bot serve`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import Any

from slack_sdk.socket_mode.aiohttp import SocketModeClient

from agent import ScriptedModel, StoreUnavailableError
from bot.app import SlackBot, open_bot
from bot.core.asgi_server import BackgroundServer
from bot.slack.rendering import RenderSettings
from bot.slack.socket_mode import SocketModeConnection, SocketModeError, run_socket_mode
from storage import SqlStore
from tests.bot import agents
from tests.bot.harness import settings_for
from tests.support.engine_fixtures import HookedStore

SOCKET_PING_SECONDS = 2.0
"""A connection cut without a close frame is noticed within about this long (`bot socket`:
10 s)."""


class _FailingFirstEnqueue:
    """A store whose database fails the first turn it is asked to queue (an outage)."""

    def __init__(self, inner: SqlStore) -> None:
        self._inner = inner
        self._failed = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def enqueue_turn(self, *args: Any, **kwargs: Any) -> Any:
        if not self._failed:
            self._failed = True
            _say("AT enqueue-failed")
            raise StoreUnavailableError("the test database is down (once)")
        return await self._inner.enqueue_turn(*args, **kwargs)


class _Api:
    def __init__(self, api_url: str) -> None:
        self.api_url = api_url


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _model(name: str) -> ScriptedModel:
    """A script from `tests.bot.agents`: a list of replies, or a function making the model."""
    script = getattr(agents, name)
    return script() if callable(script) else ScriptedModel(script)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("api_url")
    parser.add_argument("script")
    parser.add_argument("--crash", default=None)
    parser.add_argument("--role", choices=["one", "web", "worker", "socket"], default="one")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--agent", default="AGENT", help="an Agent in tests.bot.agents")
    parser.add_argument("--lease-ttl", type=float, default=1.0)
    parser.add_argument(
        "--timing",
        choices=["fast", "production"],
        default="fast",
        help="fast: the tests' short polls and leases; production: what `bot serve` / `bot "
        "worker` use by default (for benchmarks)",
    )
    args = parser.parse_args()

    def hook(stage: str, label: str) -> None:
        if args.crash == f"{stage}:{label}":
            _say(f"AT {stage}:{label}")
            time.sleep(600)  # the parent SIGKILLs us here

    # Without a crash point the bot opens its own store, as `bot serve` does (the Slack delivery
    # tables then share its transactions, the production path).
    hooked = args.crash and args.crash not in ("before-ack", "enqueue-fails")
    store: Any = HookedStore(await SqlStore.open(args.url), hook) if hooked else None
    if args.crash == "enqueue-fails":
        store = _FailingFirstEnqueue(await SqlStore.open(args.url))
    fast = args.timing == "fast"
    settings = settings_for(args.url, _Api(args.api_url), RUN_TURNS=args.role != "web")  # type: ignore[arg-type]
    if args.role == "socket":  # as `bot socket` runs: an app-level token, no signing secret
        settings = settings.model_copy(update={"slack_signing_secret": None})
    bot = await open_bot(
        settings,
        agent=getattr(agents, args.agent),
        model=_model(args.script),
        store=store,
        render_settings=RenderSettings(
            flush_interval=0.1, poll_interval=0.1, lease_ttl=args.lease_ttl
        )
        if fast
        else None,
        runtime_options={
            "lease_ttl": args.lease_ttl,
            "recovery_interval": 0.2,
            "poll_interval": 0.05,
        }
        if fast
        else None,
        worker=args.role == "worker",
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if args.role == "socket":
        return await _socket(bot, stop, crash_before_ack=args.crash == "before-ack")
    if args.role == "worker":
        await bot.start()
        try:
            _say("PORT 0")
            await stop.wait()
        finally:
            await bot.close()
        return 0
    async with BackgroundServer(bot.http_app(), port=args.port) as server:
        _say(f"PORT {server.port}")
        await stop.wait()
    return 0


async def _socket(bot: SlackBot, stop: asyncio.Event, *, crash_before_ack: bool) -> int:
    """`bot socket`'s sequence (`bot.cli.commands.socket_mode`), with the tests' ping interval."""
    connection = SocketModeConnection(
        bot, os.environ["SLACK_APP_TOKEN"], ping_interval=SOCKET_PING_SECONDS
    )
    if crash_before_ack:

        async def never(client: object, response: object) -> None:
            _say("AT before-ack")
            await asyncio.sleep(600)  # the parent SIGKILLs us here, the ack unsent

        SocketModeClient.send_socket_mode_response = never  # type: ignore[assignment,method-assign]
    try:
        await run_socket_mode(bot, connection, stop, connected=lambda: _say("PORT 0"))
    except SocketModeError as err:
        _say(f"ENDED {err}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
