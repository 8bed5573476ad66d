"""The bot as an ASGI app: its routes, and the lifespan that opens, starts and closes it.

It takes the bot through `ServedBot`, what serving needs of it, so the composition root
(`bot.app`, which builds one) and this module do not import each other."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bot.api import ApiService, api_routes
from bot.api.errors import routing_error
from bot.console.routes import console_routes
from bot.console.service import ConsoleService
from bot.core.access_log import AccessLog
from bot.core.asgi_server import ON_SHUTDOWN, on_stop_signal
from bot.core.gc_tuning import freeze_startup_heap
from bot.core.ops_server import Ops, ops_routes
from bot.slack.oauth import INSTALL_PATH, REDIRECT_PATH


class ServedBot(Protocol):
    """What the app serves (`bot.app.SlackBot` is one)."""

    @property
    def api(self) -> ApiService | None: ...

    @property
    def ops(self) -> Ops:
        """`/metrics` and `/readyz` (`bot.core.ops_server`)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def slack_events(self, request: Request) -> Response: ...

    async def health(self, request: Request) -> Response: ...

    async def oauth(self, request: Request) -> Response: ...


def serving_app(
    opener: Callable[[], Awaitable[ServedBot]], *, freeze_heap: bool = False
) -> Starlette:
    """The HTTP app; the bot is opened by its lifespan, on the event loop that serves it.

    That is what lets uvicorn run it in several processes (`WEB_CONCURRENCY`): each one imports
    the app factory and opens its own engines, which cannot cross a process or a loop.
    `freeze_heap`: a process that serves only this app (`bot serve`): its startup heap is frozen
    (see `bot.core.gc_tuning`), and a stop signal first ends the API's open streams, which would
    otherwise hold the process for its whole grace period (`bot.core.asgi_server.on_stop_signal`).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[dict[str, Any]]:
        bot = await opener()
        app.state.bot = bot

        def stopping() -> None:
            if bot.api is not None:
                bot.api.close()
            console = console_of_bot(bot)
            if console is not None:
                console.close()  # its event streams end too

        try:
            await bot.start()
            if freeze_heap:
                freeze_startup_heap()
            with on_stop_signal(stopping) if freeze_heap else contextlib.nullcontext():
                yield {ON_SHUTDOWN: stopping}
        finally:
            await bot.close()

    async def slack_events(request: Request) -> Response:
        bot: ServedBot = request.app.state.bot
        return await bot.slack_events(request)

    async def health(request: Request) -> Response:
        bot: ServedBot = request.app.state.bot
        return await bot.health(request)

    async def oauth(request: Request) -> Response:
        bot: ServedBot = request.app.state.bot
        return await bot.oauth(request)

    def api_of(request: Request) -> ApiService | None:
        bot: ServedBot = request.app.state.bot
        return bot.api

    def ops_of(request: Request) -> Ops:
        bot: ServedBot = request.app.state.bot
        return bot.ops

    return Starlette(
        routes=[
            Route("/slack/events", slack_events, methods=["POST"]),
            Route("/healthz", health, methods=["GET"]),
            *ops_routes(ops_of),
            Route(INSTALL_PATH, oauth, methods=["GET"]),
            Route(REDIRECT_PATH, oauth, methods=["GET"]),
            *api_routes(api_of),
            *console_routes(lambda request: console_of_bot(request.app.state.bot)),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: routing_error},
        middleware=[Middleware(AccessLog)],
    )


def console_of_bot(bot: ServedBot) -> ConsoleService | None:
    """The bot's operator console (`SlackBot.console`), None while it is off or for a served
    bot that has none."""
    console = getattr(bot, "console", None)
    return console if isinstance(console, ConsoleService) else None
