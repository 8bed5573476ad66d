"""What each setting's check (`tests.bot.setting_checks`) builds on: a clean environment, a
migrated SQLite database, and the Slack and Anthropic stand-ins, started on first use."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent import ModelSettings, ScriptedModel, ScriptedReply, UserMessage
from agent.seams import ModelRequest
from bot.app import SlackBot, build_model, open_bot
from bot.core.settings import Settings
from bot.testing import SlackStandIn
from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

KEY = "sk-ant-api03-every-setting-check"
TOKEN = "xoxb-every-setting-check"
SECRET = "every-setting-signing-secret"


@dataclass
class Ctx:
    """What a check builds on: a clean environment (only what the check sets is read), a
    migrated SQLite database, and stand-ins started on first use."""

    env: pytest.MonkeyPatch
    db_url: str
    tmp: Path
    stack: contextlib.AsyncExitStack
    _slack: SlackStandIn | None = None
    _anthropic: AnthropicStandin | None = None
    _slack_env: bool = False

    def set(self, **values: str) -> None:
        for name, value in values.items():
            self.env.setenv(name, value)

    async def slack(self) -> SlackStandIn:
        if self._slack is None:
            self._slack = await self.stack.enter_async_context(SlackStandIn())
        return self._slack

    async def anthropic(self) -> AnthropicStandin:
        """Started and stopped on a thread: it serves from a thread of its own, and waiting
        for that must not hold this loop."""
        if self._anthropic is None:
            standin = AnthropicStandin()
            await asyncio.to_thread(standin.start)
            self.stack.push_async_callback(asyncio.to_thread, standin.stop)
            self._anthropic = standin
            self.set(ANTHROPIC_BASE_URL=standin.base_url)
        return self._anthropic

    async def slack_env(self) -> None:
        """What every Slack command needs: a database, one workspace's credentials, a model
        (set once: a check may then take one away)."""
        if self._slack_env:
            return
        self._slack_env = True
        standin = await self.slack()
        self.set(
            DATABASE_URL=self.db_url,
            SLACK_BOT_TOKEN=TOKEN,
            SLACK_SIGNING_SECRET=SECRET,
            SLACK_API_URL=standin.api_url,
            ANTHROPIC_API_KEY=KEY,
        )

    async def bot(self, **kwargs: Any) -> SlackBot:
        """The bot `bot serve` opens from this environment (a scripted model unless the check
        looks at the model); closed when the check ends."""
        await self.slack_env()
        kwargs.setdefault("model", ScriptedModel([ScriptedReply(text="ok")]))
        bot = await open_bot(Settings(), **kwargs)
        self.stack.push_async_callback(bot.close)
        return bot

    async def sent(self, request: ModelRequest | None = None) -> dict[str, Any]:
        """The body of the one request the model this environment builds sends."""
        api = await self.anthropic()
        self.set(ANTHROPIC_API_KEY=KEY)
        api.enqueue(sse_reply(Text("ok")))
        model = await asyncio.to_thread(build_model, Settings())  # the SDK's first import
        try:
            async for _ in model.stream(request or hello()):
                pass
        finally:
            await model.aclose()  # type: ignore[attr-defined]
        return api.requests[-1].body


Check = Callable[[Ctx], Awaitable[None]]


def hello(*, may_wait: bool = False) -> ModelRequest:
    return ModelRequest(
        system="",
        messages=(UserMessage(turn_id="t", text="hi"),),
        settings=ModelSettings(),
        may_wait=may_wait,
    )
