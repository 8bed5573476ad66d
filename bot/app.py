"""The running bot: engine, delivery, renderers and Bolt, wired once (the composition root).

Served over HTTP by `bot.core.serving.serving_app` (the ASGI app and its lifespan), whose
`/slack/events` is checked before Bolt sees it by `bot.slack.http`; the model comes from
`bot.core.models`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from slack_bolt.async_app import AsyncApp
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

if TYPE_CHECKING:
    from storage.redis.dispatch import RedisDispatcher
    from storage.redis.events import RedisEventRelay

from agent import Agent, Model, Runtime, SessionStore, TurnEvent
from bot.api import ApiService, ApiSettings, parse_tokens
from bot.console.service import ConsoleService
from bot.console.wiring import console_for
from bot.core.logs import scrub_also
from bot.core.metrics import BotMetrics, PrometheusMeter
from bot.core.models import build_model as build_model  # `bot.app.build_model`, as before
from bot.core.models import model_for
from bot.core.ops_server import Ops
from bot.core.serving import serving_app as serving_app  # `bot.app.serving_app`, as before
from bot.core.settings import Settings
from bot.core.turn_log import Meters, TurnLog
from bot.slack import unavailable
from bot.slack.agent_entry import AgentEntry
from bot.slack.approval_clicks import AnswerHandler
from bot.slack.bolt_log import bolt_logger
from bot.slack.calls import make_client, make_render_client
from bot.slack.clients import InstalledClients, SingleToken, SlackClients
from bot.slack.deny_modal import ModalSeal
from bot.slack.error_counts import SlackErrorCounter
from bot.slack.feedback import FeedbackHandler
from bot.slack.home import HomeTab
from bot.slack.http import events_response, oauth_response
from bot.slack.listeners import ACKS_IN_FLIGHT, Listeners
from bot.slack.oauth import Uninstalls, authorize, install_flow, open_stores
from bot.slack.rendering import RenderSettings
from bot.slack.rendering.pool import RendererPool
from bot.slack.resets import Resets
from bot.slack.stops import Stops
from storage import SqlStore
from storage.delivery.store import DeliveryStore
from storage.installations import InstallationStores

log = logging.getLogger(__name__)


class SlackBot:
    def __init__(
        self,
        *,
        settings: Settings,
        agent: Agent,
        runtime: Runtime,
        delivery: DeliveryStore,
        client: AsyncWebClient,
        render_settings: RenderSettings | None = None,
        clock: Callable[[], float] = time.time,
        owner: str | None = None,
        sweep_interval: float = 2.0,
        render_client: AsyncWebClient | None = None,
        clients: SlackClients | None = None,
        render_clients: SlackClients | None = None,
        installations: InstallationStores | None = None,
        metrics: BotMetrics | None = None,
    ) -> None:
        """`render_client`: the renderers' own client (`make_render_client`), else `client`.
        `clients`, `render_clients`: each workspace's, for work outside a Bolt listener (one
        token: `client` and `render_client` for every workspace). `installations`: installs
        in many workspaces (`bot.slack.oauth`); `client` is then Bolt's base client, with no
        token. `metrics`: what the runtime's meter and the Slack clients count into (a new,
        empty set by default); served with readiness by `ops`."""
        self.settings = settings
        self.metrics = metrics or BotMetrics()
        token = settings.metrics_token
        self.ops = Ops(
            metrics=self.metrics,
            store=runtime.store,
            redis_url=settings.redis_url,
            token=token.get_secret_value() if token else None,
        )
        self.agent = agent
        self.runtime = runtime
        self.delivery = delivery
        self.client = client
        self.installations = installations
        self.clients: SlackClients = clients or SingleToken(client)
        self.render_clients: SlackClients = render_clients or SingleToken(render_client or client)
        self.owner = owner or f"bot-{uuid.uuid4().hex[:10]}"
        signing = settings.slack_signing_secret
        self.verifier = (
            SignatureVerifier(signing.get_secret_value())
            if signing and signing.get_secret_value()
            else None
        )
        """None without a signing secret (`bot socket` needs none, and slack_sdk refuses an empty
        one): `/slack/events` then takes no request, as none can be verified."""
        self.home: HomeTab | None = HomeTab(
            inbox=runtime, delivery=delivery, clients=self.clients, offers=self._offers
        )
        self.renderers = RendererPool(
            runtime=runtime,
            delivery=delivery,
            clients=self.render_clients,
            settings=render_settings
            or RenderSettings(
                stream_max_age=settings.stream_max_age,
                flush_interval=settings.flush_interval,
                flush_chars=settings.flush_chars,
            ),
            owner=self.owner,
            clock=clock,
            sweep_interval=sweep_interval,
            enabled=runtime.run_turns,
            home=self.home,
        )
        self.answers = AnswerHandler(
            runtime=runtime,
            agent=agent,
            delivery=delivery,
            clients=self.clients,
            kick=self.renderers.kick,
            inbox=runtime,
            home=self.home,
            seal=_modal_seal(settings),
        )
        self.listeners = Listeners(
            runtime=runtime,
            agent=agent,
            delivery=delivery,
            renderers=self.renderers,
            answers=self.answers,
            resets=Resets(runtime=runtime, agent=agent, delivery=delivery, clients=self.clients),
            entry=AgentEntry(
                agent=agent, delivery=delivery, renderers=self.renderers, clients=self.clients
            ),
            stops=Stops(
                runtime=runtime,
                agent=agent,
                delivery=delivery,
                clients=self.render_clients,
                kick=self.renderers.kick,
            ),
            feedback=FeedbackHandler(delivery=delivery),
            home=self.home,
            replace_in_flight=settings.replace_in_flight,
            reset_command=settings.reset_command,
            max_inbound_chars=settings.max_inbound_chars,
            acks_in_flight=None if runtime.run_turns else ACKS_IN_FLIGHT,
            uninstalls=None
            if installations is None
            else Uninstalls(
                stores=installations,
                clients=(self.clients, self.render_clients),
                runtime=runtime,
                agent=agent,
                delivery=delivery,
            ),
        )
        # Installs in many workspaces: Bolt's install flow, and its authorization of each event
        # by the workspace's stored token (an `AsyncAuthorize`, which Bolt uses as it is).
        oauth: dict[str, Any] = (
            {}
            if installations is None
            else {
                "oauth_flow": install_flow(settings, installations, client),
                "authorize": authorize(settings, installations, client),
            }
        )
        self.bolt = AsyncApp(
            # Named, or Bolt names it after the caller's file through `inspect.stack()`, which
            # resolves every loaded module's path on disk: 100-200 ms on the event loop.
            name="app.py",
            client=client,
            signing_secret=signing.get_secret_value() if signing else "",
            process_before_response=True,
            # `/slack/events` verifies every request (same slack_sdk verifier) before Bolt runs;
            # Socket Mode traffic needs no signature. Checking twice only costs ack time.
            request_verification_enabled=False,
            logger=bolt_logger(),
            **oauth,
        )
        self.listeners.register(self.bolt)
        self.bolt.error(unavailable.error_handler(runtime))  # 503 while the database is away
        tokens = parse_tokens(settings.api_tokens)
        self.api: ApiService | None = (
            ApiService(
                runtime=runtime,
                agent=agent,
                tokens=tokens,
                settings=ApiSettings(
                    wait=settings.api_turn_wait,
                    heartbeat=settings.api_heartbeat,
                    poll=settings.api_poll,
                    max_chars=settings.max_inbound_chars,
                ),
            )
            if tokens is not None
            else None
        )
        """The HTTP turn API, None while `API_TOKENS` is unset (its routes then answer 404)."""
        self.console: ConsoleService | None = console_for(
            settings=settings, runtime=runtime, agent=agent, delivery=delivery
        )
        """The operator console, None while `CONSOLE_TOKENS` is unset (`/console` is 404)."""
        self._started = False
        self._dispatcher: RedisDispatcher | None = None
        self._serving: asyncio.Task[None] | None = None
        self._relay: RedisEventRelay | None = None
        self._unwatch: Callable[[], None] | None = None
        self._waking: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        if not self._started:
            self._started = True
            if self.settings.redis_url:
                self._start_dispatch(self.settings.redis_url)
            self._unwatch = self.runtime.hub.subscribe(self._on_event)
            self.runtime.start_recovery()
            self.renderers.start()
            for key in await self.delivery.active_sessions():
                self.renderers.kick(key)

    def _offers(self, tool_name: str) -> tuple[float | None, Sequence[str] | None]:
        """What the Home tab offers beyond Approve and Deny for a proposal of this tool, as
        its `confirmation.requested` event does in the thread."""
        tool = self.agent.tool_named(tool_name)
        if tool is None:
            return None, None
        return tool.grantable_for, tool.editable or None

    def _on_event(self, event: TurnEvent) -> None:
        """A request ended in this process without anyone from Slack (an expiry timer this
        process's sweep or clock applied, an answer from host code): wake the thread's renderer,
        durably, so the request is shown settled and the turn it resumes is shown at all.
        (A click wakes it with the answer, in the answer's own transaction.) A vote on a request
        that needs several wakes it too: the request's message shows the progress; so does a
        reminder or an escalation the sweep fired (the thread says so)."""
        if event.type in (
            "input.resolved",
            "confirmation.resolved",
            "approval.voted",
            "approval.reminded",
            "approval.escalated",
        ):
            task = asyncio.create_task(self._wake(event.session))
            self._waking.add(task)
            task.add_done_callback(self._waking.discard)

    async def _wake(self, key: str) -> None:
        try:
            if await self.delivery.get_target(key) is not None:
                await self.delivery.mark_active(key, time.time())
                self.renderers.kick(key)
        except Exception:
            log.exception("could not wake a thread's renderer", extra={"session": key})

    def _start_dispatch(self, url: str) -> None:
        """With Redis, what one process queues or cancels reaches the workers at once, and the
        live events of a turn reach the process rendering its thread (or observing it) as they
        happen; without it (or while it is down) workers find the work by polling the database,
        which stays the record, and a reply rendered elsewhere shows as its steps commit."""
        from storage.redis.dispatch import RedisDispatcher
        from storage.redis.events import RedisEventRelay

        prefix = self.settings.redis_prefix
        self._dispatcher = RedisDispatcher(
            url, stream=f"{prefix}:turns", group=f"{prefix}:workers", channel=f"{prefix}:cancel"
        )
        self.runtime.attach(self._dispatcher)
        if self.runtime.run_turns:
            self._serving = asyncio.create_task(self._dispatcher.serve(self.runtime))
        self._relay = RedisEventRelay(
            url, prefix=f"{prefix}:events:", on_lag=self.metrics.relay_lagged
        )
        self._relay.attach(self.runtime)

    async def close(self) -> None:
        if self.api is not None:
            self.api.close()
        if self.console is not None:
            self.console.close()
        if self._unwatch is not None:
            self._unwatch()
        if self._relay is not None:
            await self._relay.close()
        if self._dispatcher is not None:
            await self._dispatcher.close()
        if self._serving is not None:
            with contextlib.suppress(Exception):
                await self._serving
        await self.answers.close()
        if self.home is not None:
            await self.home.close()
        await self.renderers.close()
        await self.runtime.close()
        if self.agent.mcp is not None:
            await self.agent.mcp.close()
        await self.delivery.close()
        if self.installations is not None:
            await self.installations.close()
        await self.ops.close()
        await self.runtime.store.close()

    # HTTP ----------------------------------------------------------------------------------

    async def slack_events(self, request: Request) -> Response:
        """Slack's requests, checked before Bolt sees them (`bot.slack.http`)."""
        return await events_response(
            request,
            verifier=self.verifier,
            bolt=self.bolt,
            reached=lambda: self.runtime.outage.reached(writing=False),
        )

    async def oauth(self, request: Request) -> Response:
        """`/slack/install` and `/slack/oauth_redirect` (`bot.slack.http.oauth_response`)."""
        return await oauth_response(request, self.bolt)

    async def health(self, request: Request) -> Response:
        return JSONResponse({"ok": True, "owner": self.owner, "rendering": self.renderers.running})

    def http_app(self) -> Starlette:
        """This bot served over HTTP; it starts and closes with the app."""

        async def opened() -> SlackBot:
            return self

        return serving_app(opened)


def _modal_seal(settings: Settings) -> ModalSeal | None:
    """The Deny modal's metadata is signed with the app's signing secret (HTTP), or, in Socket
    Mode where there may be none, its bot token: a key only this app holds either way."""
    for secret in (
        settings.slack_signing_secret,
        settings.slack_bot_token,
        settings.slack_client_secret,
    ):
        if secret is not None and secret.get_secret_value():
            return ModalSeal(secret.get_secret_value())
    return None


def engine_secrets(settings: Settings) -> list[str]:
    """What the engine scrubs from tool errors: what the logs scrub (`Settings.secrets`)."""
    return settings.secrets()


async def open_bot(
    settings: Settings,
    *,
    agent: Agent | None = None,
    model: Model | None = None,
    store: SessionStore | None = None,
    clock: Callable[[], float] = time.time,
    render_settings: RenderSettings | None = None,
    runtime_options: dict[str, Any] | None = None,
    owner: str | None = None,
    worker: bool = False,
) -> SlackBot:
    """Open everything the bot needs from settings; parts can be injected (tests, the demo).

    `worker=True` is a process that finds its work by polling (queued turns, active renders)
    because the web processes that received the events do not run them.
    """
    from agent import load_agent

    # The API's turns are source "api": an agent may give them `instructions.api.md` and a
    # surface policy; without one they get the base instructions and every tool.
    sources = ["slack", "api"] if settings.api_tokens is not None else ["slack"]
    chosen = agent or load_agent(settings.agent_path(), emitted_sources=sources)
    if chosen.mcp is None and chosen.mcp_servers:
        # Off the loop: the MCP SDK's first import builds its pydantic types (~0.4 s of CPU).
        await asyncio.to_thread(importlib.import_module, "agent.mcp")
        from agent.mcp import attach_mcp

        # MCP servers' tools are listed now (a server that is down leaves its tools out).
        chosen = await attach_mcp(chosen)
        if chosen.mcp is not None:  # their header and environment values, out of every log line
            scrub_also(chosen.mcp.secrets)
    opened = store or await SqlStore.open(settings.database_url)
    try:
        # Shared only with a store opened here from the same URL (an injected one may not be).
        delivery = await DeliveryStore.open(
            settings.database_url, store=opened if store is None else None
        )
    except BaseException:
        await opened.close()
        raise
    token = settings.slack_bot_token
    secret = token.get_secret_value() if token else ""
    base = settings.slack_api_url
    installations: InstallationStores | None = None
    clients: dict[str, SlackClients] = {}
    metrics = BotMetrics()
    counter = SlackErrorCounter(metrics)
    if settings.oauth:
        installations = await open_stores(settings)
        found = installations.installations
        clients["clients"] = InstalledClients(
            found, lambda t: make_client(t, base, observer=counter)
        )
        clients["render_clients"] = InstalledClients(
            found, lambda t: make_render_client(t, base, observer=counter)
        )
    client = make_client(None if settings.oauth else secret, base, observer=counter)
    options = runtime_options or ({"recovery_interval": settings.worker_poll} if worker else {})
    if model is None:
        # Off the loop: the first build imports the Anthropic SDK and builds its pydantic
        # types, some 300 ms of CPU the loop (serving another bot in the same process, or a
        # test's other servers) must not wait on.
        model = await asyncio.to_thread(model_for, settings, chosen.model)
    runtime = Runtime(
        opened,
        model,
        agent=chosen,
        run_turns=settings.run_turns,
        secrets=[*engine_secrets(settings), *(chosen.mcp.secrets if chosen.mcp else ())],
        context_messages=settings.context_messages,
        tool_concurrency=settings.tool_concurrency,
        meter=Meters([PrometheusMeter(metrics), TurnLog()]),
        capture_content=settings.capture_content,
        **options,
    )
    return SlackBot(
        settings=settings,
        agent=chosen,
        runtime=runtime,
        delivery=delivery,
        client=client,
        render_client=make_render_client(secret, settings.slack_api_url, observer=counter),
        metrics=metrics,
        installations=installations,
        **clients,
        render_settings=render_settings,
        clock=clock,
        owner=owner,
        sweep_interval=settings.worker_poll if worker else 2.0,
    )
