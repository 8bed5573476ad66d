"""The bot under test: served by uvicorn in this process, talking to the Slack stand-in over HTTP,
driven by signed requests. Crash tests run it as a subprocess instead (`tests.bot.app_child`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from agent import Agent
from bot.app import SlackBot, open_bot
from bot.asgi_server import BackgroundServer
from bot.renderer import RenderSettings
from bot.settings import Settings
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message

SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token-123456"
FAST = RenderSettings(flush_interval=0.1, poll_interval=0.1, lease_ttl=2.0)


def settings_for(url: str, standin: SlackStandIn, **extra: Any) -> Settings:
    return Settings(
        DATABASE_URL=url,
        SLACK_BOT_TOKEN=SecretStr(TOKEN),
        SLACK_SIGNING_SECRET=SecretStr(SECRET),
        SLACK_API_URL=standin.api_url,
        **extra,
    )


@dataclass
class Running:
    bot: SlackBot
    server: BackgroundServer
    slack: SlackDriver
    standin: SlackStandIn

    async def stop(self) -> None:
        await self.slack.aclose()
        await self.server.stop()

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
    **extra: Any,
) -> Running:
    kwargs: dict[str, Any] = {"render_settings": render}
    if clock is not None:
        kwargs["clock"] = clock
    bot = await open_bot(
        settings_for(url, standin, **extra),
        agent=agent,
        model=model,
        runtime_options={"poll_interval": 0.05, "recovery_interval": 0.2, "lease_ttl": 2.0},
        **kwargs,
    )
    server = await BackgroundServer(bot.http_app()).start()
    return Running(bot, server, SlackDriver(server.url, SECRET, standin=standin), standin)


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
    """The bot's messages in a channel that are not approvals."""
    return [m for m in standin.bot_messages(channel) if not m.blocks]


def idle(standin: SlackStandIn, channel: str) -> bool:
    return not any(m.streaming for m in standin.bot_messages(channel))
