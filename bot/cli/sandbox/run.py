"""`bot sandbox`: start everything, serve the page, stop on SIGINT / SIGTERM.

The model is the scripted one (offline, `bot.cli.sandbox.script`) unless `ANTHROPIC_API_KEY` holds a
key (not `.env.example`'s placeholder): then it is Claude, built as `bot serve` builds it, every
`ANTHROPIC_*` setting included (`ANTHROPIC_BASE_URL` too, which is how the tests point it at
their Anthropic stand-in). The command says which it runs, and so does the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
from pathlib import Path

from agent import Model, ModelError, ScriptedModel
from bot.cli.demo import CHANNEL, offline_slack
from bot.cli.sandbox.page_app import OFFLINE_NOTE, SandboxPage
from bot.cli.sandbox.script import sandbox_reply
from bot.cli.sandbox.state import Channel, Person
from bot.core.asgi_server import BackgroundServer
from bot.core.models import build_model
from bot.core.settings import Settings

DEFAULT_PORT = 3100
PEOPLE = [
    Person(id="U0ALICE", name="alice", role="asks; answers her own requests"),
    Person(id="U0BOB", name="bob", role="may not answer alice's requests"),
    Person(id="U0CAROL", name="carol", role="asks; answers her own requests"),
]
CHANNELS = [Channel(id=CHANNEL, name="ops"), Channel(id="C0GENERAL", name="general")]
DELTA_DELAY = 0.12
"""Seconds between the scripted model's chunks: slow enough to watch a reply grow."""


def sandbox_model(settings: Settings) -> tuple[Model, str]:
    """The model, and what to call it: on the command line and in the page's header."""
    if not settings.credential("ANTHROPIC_API_KEY"):
        scripted = ScriptedModel(
            responder=sandbox_reply, delta_delay=DELTA_DELAY, keep_requests=False
        )
        return scripted, "the scripted model (offline; set ANTHROPIC_API_KEY to talk to Claude)"
    where = settings.anthropic_base_url or "the Anthropic API"
    return build_model(settings), f"Claude, {settings.anthropic_model} at {where}"


async def run_sandbox(settings: Settings, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> int:
    try:
        model, named = await asyncio.to_thread(sandbox_model, settings)  # the SDK loads slowly
    except ModelError as err:  # a thinking budget the API would refuse
        print(f"bot sandbox: {err}", file=sys.stderr)
        return 2
    scripted = isinstance(model, ScriptedModel)
    try:
        with tempfile.TemporaryDirectory(prefix="bot-sandbox-") as tmp:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'sandbox.db'}"
            async with offline_slack(url, model) as offline:
                note = (
                    OFFLINE_NOTE
                    if scripted
                    else f"the bot against a local Slack stand-in · {named}"
                )
                page = SandboxPage(
                    offline.standin, offline.driver, people=PEOPLE, channels=CHANNELS, note=note
                )
                try:
                    server = BackgroundServer(page.app, host=host, port=port)
                except OSError as err:
                    print(
                        f"bot sandbox: cannot listen on {host}:{port}: {err.strerror}",
                        file=sys.stderr,
                    )
                    return 2
                await server.start()
                network = "no token, no network" if scripted else "Slack offline, the model online"
                print(f"sandbox: open {server.url}/  ({network}; Ctrl-C stops)")
                print(f"model: {named}")
                print(f"database: {url} (deleted at exit)", flush=True)
                try:
                    await _until_signalled()
                finally:
                    await server.stop()
    finally:
        close = getattr(model, "aclose", None)
        if close is not None:
            await close()
    return 0


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # not on Windows' loops
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
