"""The bot under test: served by uvicorn in this process, talking to the Slack stand-in over HTTP,
driven by signed requests. Crash tests run it as a subprocess instead (`tests.bot.app_child`).

Two serving modes, as users run them: `one-process` (`bot serve` running the turns) and
`web+worker` (a web bot with `RUN_TURNS=false` that only verifies, queues and acks, plus a worker
bot, opened as `bot worker` opens it, that finds the turns and renders them; each has its own
engine, connections and renderers, so nothing passes between them but the database)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from agent import Agent, TurnStatus
from bot.app import SlackBot, open_bot
from bot.core.asgi_server import BackgroundServer
from bot.core.settings import Settings
from bot.slack.rendering import RenderSettings
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message, is_request
from storage import SqlStore
from storage.delivery.store import DeliveryStore

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token-123456"
FAST = RenderSettings(flush_interval=0.1, poll_interval=0.1, lease_ttl=2.0)
ONE_PROCESS = "one-process"
WEB_AND_WORKER = "web+worker"
RUNTIME_OPTIONS = {"poll_interval": 0.05, "recovery_interval": 0.2, "lease_ttl": 2.0}


def settings_for(url: str, standin: SlackStandIn, **extra: Any) -> Settings:
    """`extra` may replace the defaults (`SLACK_BOT_TOKEN=None`: installs in many workspaces)."""
    defaults: dict[str, Any] = {
        "DATABASE_URL": url,
        "SLACK_BOT_TOKEN": SecretStr(TOKEN),
        "SLACK_SIGNING_SECRET": SecretStr(SECRET),
        "SLACK_API_URL": standin.api_url,
    }
    return Settings(**{**defaults, **extra})


@dataclass
class Running:
    bot: SlackBot
    server: BackgroundServer
    slack: SlackDriver
    standin: SlackStandIn
    worker: SlackBot | None = None
    """In `web+worker` mode, the process that runs and renders the turns."""

    async def stop(self) -> None:
        await self.slack.aclose()
        await self.server.stop()
        if self.worker is not None:
            await self.worker.close()
            self.worker = None

    @property
    def runner(self) -> SlackBot:
        """The bot whose runtime runs the turns (the worker, where there is one)."""
        return self.worker or self.bot

    def session(self, key: str) -> Any:
        return self.bot.runtime.session(self.bot.agent, key)

    async def turns(self, key: str) -> list[Any]:
        return list(await self.bot.runtime.store.list_turns(key))


async def start_bot(
    url: str,
    standin: SlackStandIn,
    agent: Agent,
    model: Any,
    *,
    render: RenderSettings = FAST,
    clock: Callable[[], float] | None = None,
    serving: str = ONE_PROCESS,
    **extra: Any,
) -> Running:
    kwargs: dict[str, Any] = {"render_settings": render}
    if clock is not None:
        kwargs["clock"] = clock
    worker: SlackBot | None = None
    if serving == WEB_AND_WORKER:
        extra = {**extra, "RUN_TURNS": False}
        worker = await open_bot(
            settings_for(url, standin, **{**extra, "RUN_TURNS": True}),
            agent=agent,
            model=model,
            runtime_options=dict(RUNTIME_OPTIONS),
            worker=True,
            **kwargs,
        )
        await worker.start()
    elif serving != ONE_PROCESS:
        raise ValueError(f"unknown serving mode {serving!r}")
    try:
        bot = await open_bot(
            settings_for(url, standin, **extra),
            agent=agent,
            model=model,
            runtime_options=dict(RUNTIME_OPTIONS),
            **kwargs,
        )
        server = await BackgroundServer(bot.http_app()).start()
    except BaseException:
        if worker is not None:
            await worker.close()
        raise
    slack = SlackDriver(server.url, SECRET, standin=standin)
    return Running(bot, server, slack, standin, worker)


async def eventually(check: Callable[[], Any], within: float = 15.0, what: str = "") -> Any:
    """Poll until `check()` is truthy (it may be async); the stand-in changes under HTTP."""
    async with asyncio.timeout(within):
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(0.05)


async def settled(before: set[asyncio.Task[Any]]) -> None:
    """Wait for the work the requests started in this process (Bolt's lazy listeners run after
    the response) to end, so what it would log, store or send is there to see. `before`:
    `asyncio.all_tasks()` taken before the requests."""

    def quiet() -> bool:
        return all(t.done() for t in asyncio.all_tasks() - before - {asyncio.current_task()})

    await eventually(quiet, what="background work of the requests ended")


async def rendered_out(db_url: str, within: float = 30.0) -> None:
    """Wait until the bot, in whichever processes, has nothing left to run or show: no turn
    queued or running, and every session's renderer caught up and gone idle (its delivery
    target no longer active: `go_idle` clears it only once the last Slack call has answered).
    From then on nothing more reaches Slack until something new arrives, so a test that checks
    nothing was posted twice checks here, not after a sleep that a busy machine may outlast."""
    store = await SqlStore.open(db_url)
    delivery = await DeliveryStore.open(db_url)
    unfinished = (TurnStatus.QUEUED, TurnStatus.RUNNING)

    async def quiet() -> bool:
        if await delivery.active_sessions():
            return False
        return not any(t.status in unfinished for t in await store.open_turns())

    try:
        await eventually(quiet, within, what="the bot has nothing left to run or show")
    finally:
        await delivery.close()
        await store.close()


def approval(standin: SlackStandIn, channel: str) -> Message | None:
    for message in standin.bot_messages(channel):
        if any(b.get("type") == "actions" for b in message.blocks or []):
            return message
    return None


def buttons(message: Message) -> tuple[dict[str, Any], dict[str, Any]]:
    actions = next(b for b in message.blocks or [] if b.get("type") == "actions")
    approve, deny = actions["elements"]
    return approve, deny


def replies(standin: SlackStandIn, channel: str) -> list[Message]:
    """The bot's messages in a channel that are not approvals (a final answer carries its
    feedback buttons as blocks)."""
    return [m for m in standin.bot_messages(channel) if not is_request(m)]


def feedback_buttons(message: Message) -> dict[str, Any] | None:
    """The `feedback_buttons` element under an answer, or None."""
    for block in message.blocks or []:
        if block.get("type") == "context_actions":
            for element in block.get("elements", []):
                if element.get("type") == "feedback_buttons":
                    return dict(element)
    return None


def idle(standin: SlackStandIn, channel: str) -> bool:
    return not any(m.streaming for m in standin.bot_messages(channel))
