"""`bot demo`: the whole Slack path offline, printed as a readable thread.

A local stand-in plays the Slack Web API and a driver plays Slack's side, sending signed events
and clicks over HTTP to the bot served by uvicorn, exactly as in production: a mention → a reply
streamed with its tool timeline → an approval → a click by someone not allowed (refused,
ephemeral) → a click by the requester → the final reply.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from pathlib import Path

from pydantic import SecretStr

from agent import ScriptedModel
from bot.app import open_bot
from bot.asgi_server import BackgroundServer
from bot.demo_agent import DEMO_AGENT, DEMO_SCRIPT
from bot.renderer import RenderSettings
from bot.settings import Settings
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message
from storage import upgrade_database

SECRET = "demo-signing-secret"
CHANNEL = "C0DEMO"
NAMES = {"U0ALICE": "alice", "U0BOB": "bob"}


async def wait_until(check: Callable[[], bool], within: float = 20.0) -> None:
    """Poll the stand-in's record (it changes from HTTP handlers, not from anything awaitable)."""
    async with asyncio.timeout(within):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def _approval(standin: SlackStandIn) -> Message | None:
    for message in standin.bot_messages(CHANNEL):
        if any(b.get("type") == "actions" for b in message.blocks or []):
            return message
    return None


async def run_slack_demo(database_url: str | None = None) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        url = database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'demo.db'}"
        await upgrade_database(url)
        async with SlackStandIn() as standin:
            settings = Settings(
                DATABASE_URL=url,
                SLACK_BOT_TOKEN=SecretStr("xoxb-offline-demo"),
                SLACK_SIGNING_SECRET=SecretStr(SECRET),
                SLACK_API_URL=standin.api_url,
            )
            bot = await open_bot(
                settings,
                agent=DEMO_AGENT,
                model=ScriptedModel(DEMO_SCRIPT, delta_delay=0.05),
                render_settings=RenderSettings(flush_interval=0.2, poll_interval=0.2),
            )
            server = await BackgroundServer(bot.http_app()).start()
            try:
                async with SlackDriver(server.url, SECRET, standin=standin) as slack:
                    return await _story(standin, slack)
            finally:
                await server.stop()


async def _story(standin: SlackStandIn, slack: SlackDriver) -> int:
    print("Offline Slack demo: a stand-in Slack API, signed events over HTTP, the real engine.\n")
    thread = await slack.mention(
        "U0ALICE", "order 42 arrived broken, can you sort it out?", channel=CHANNEL, twin=True
    )
    print("alice mentions the bot (Slack sends the app_mention and its message twin)…")
    await wait_until(lambda: _approval(standin) is not None)
    approval = _approval(standin)
    assert approval is not None
    assert approval.blocks is not None
    approve = next(b for b in approval.blocks if b["type"] == "actions")["elements"][0]
    print("\n" + standin.render_thread(CHANNEL, thread, NAMES) + "\n")

    print("bob clicks Approve (only alice may answer)…")
    await slack.click("U0BOB", approve, channel=CHANNEL, message_ts=approval.ts, thread_ts=thread)
    await wait_until(lambda: bool(standin.ephemerals))
    print(f"  ephemeral to bob: {standin.ephemerals[-1]['text']}\n")

    print("alice clicks Approve…")
    await slack.click("U0ALICE", approve, channel=CHANNEL, message_ts=approval.ts, thread_ts=thread)
    await wait_until(lambda: any("refunded" in m.text for m in standin.bot_messages(CHANNEL)))
    await wait_until(lambda: not any(m.streaming for m in standin.bot_messages(CHANNEL)))
    print("\n" + standin.render_thread(CHANNEL, thread, NAMES) + "\n")
    methods: dict[str, int] = {}
    for call in standin.calls:
        methods[call.method] = methods.get(call.method, 0) + 1
    print("Slack API calls: " + ", ".join(f"{m} x{n}" for m, n in methods.items()))
    return 0
