"""`bot serve --offline` (or `BOT_OFFLINE=true bot serve`): the whole bot on one machine with no
Slack workspace and no Anthropic key, for a first run.

What is real: the bot served by uvicorn (`/slack/events`, `/healthz`, the HTTP turn API with
`API_TOKENS`), the engine, the agent (`AGENT_DIR`, the example by default) and its tools, the
SQLite database (`DATABASE_URL`, migrated at start). What stands in: Slack, a stand-in Web API
started in this process (its URL the bot's `SLACK_API_URL`, with a bot token and signing secret
generated at start, scrubbed from the logs and never shown), and the model, scripted
(`bot.cli.offline_replies`). People act in Slack through `bot.cli.offline_slack`'s routes.

It says so loudly: a WARNING at start and `"offline": true` with the same warning on
`/healthz`. It is refused (`Settings._offline_problems`) beside real credentials, a database
other than SQLite, Redis, `RUN_TURNS=false` or several web processes, and it listens on
127.0.0.1 unless `HOST` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from collections.abc import AsyncIterator

from pydantic import SecretStr
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent import Model, ScriptedModel
from bot.app import SlackBot, open_bot, serving_app
from bot.cli.offline_replies import ops_reply
from bot.cli.offline_slack import OfflineSlack
from bot.core.access_log import AccessLog
from bot.core.logs import setup_logging
from bot.core.settings import Settings
from bot.testing import SlackStandIn
from storage import upgrade_database

log = logging.getLogger(__name__)

WARNING = (
    "OFFLINE MODE: Slack is a stand-in inside this process and the model is scripted; nothing "
    "reaches Slack or Anthropic. For trying the bot, never for production."
)
DELTA_DELAY = 0.05
"""Seconds between the scripted model's chunks, so a reply streams as Claude's would."""
LOCAL = "127.0.0.1"


def offline_model() -> Model:
    return ScriptedModel(responder=ops_reply, delta_delay=DELTA_DELAY, keep_requests=False)


def serve_offline(settings: Settings) -> int:
    """The command: migrate the SQLite database, check the agent assembles, then serve one web
    process (the stand-in cannot be shared between several)."""
    from bot.cli.commands import run_web

    asyncio.run(_preflight(settings))
    host = settings.host if "host" in settings.model_fields_set and settings.host else LOCAL
    log.warning(WARNING, extra={"port": settings.port, "host": host, "offline": True})
    run_web("bot.cli.offline:web_app", host=host, port=settings.port, processes=1)
    return 0


async def _preflight(settings: Settings) -> None:
    await upgrade_database(settings.database_url)  # SQLite only: `_offline_problems`
    bot = await open_bot(
        _with_slack(settings, "preflight", "http://127.0.0.1:9/api/"), model=offline_model()
    )
    await bot.close()


def _with_slack(
    settings: Settings, secret: str, api_url: str, token: str = "xoxb-offline"
) -> Settings:
    return settings.model_copy(
        update={
            "offline": True,
            "slack_bot_token": SecretStr(token),
            "slack_signing_secret": SecretStr(secret),
            "slack_api_url": api_url,
        }
    )


def web_app() -> Starlette:
    """uvicorn's app factory for the offline web process: the bot's own app (`serving_app`),
    its `/healthz` saying it is offline, the offline Slack routes, and the stand-in started
    before the bot opens and stopped after it closes."""
    settings = Settings()
    secret = secrets.token_urlsafe(24)
    token = f"xoxb-offline-{secrets.token_hex(12)}"
    scrubbed = _with_slack(settings, secret, settings.slack_api_url, token).secrets()
    setup_logging(level=settings.log_level, fmt=settings.log_format, secrets=scrubbed)
    standin = SlackStandIn()
    slack = OfflineSlack(standin, secret)

    async def opener() -> SlackBot:
        bot = await open_bot(
            _with_slack(settings, secret, standin.api_url, token), model=offline_model()
        )
        log.warning(WARNING, extra={"agent": bot.agent.name, "offline": True})
        return bot

    inner = serving_app(opener, freeze_heap=True)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with standin, inner.router.lifespan_context(app):
            yield

    async def health(request: Request) -> Response:
        bot: SlackBot = request.app.state.bot
        answer = json.loads(bytes((await bot.health(request)).body))
        return JSONResponse({**answer, "offline": True, "warning": WARNING})

    kept: list[BaseRoute] = [
        r for r in inner.routes if not (isinstance(r, Route) and r.path == "/healthz")
    ]
    routes = [Route("/healthz", health, methods=["GET"]), *slack.routes(), *kept]
    return Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(AccessLog)])
