"""`bot sandbox`: start everything, serve the page, stop on SIGINT / SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import tempfile
from pathlib import Path

from agent import ScriptedModel
from bot.asgi_server import BackgroundServer
from bot.demo import CHANNEL, offline_slack
from bot.sandbox.page_app import SandboxPage
from bot.sandbox.script import sandbox_reply
from bot.sandbox.state import Channel, Person

DEFAULT_PORT = 3100
PEOPLE = [
    Person(id="U0ALICE", name="alice", role="asks; answers her own requests"),
    Person(id="U0BOB", name="bob", role="may not answer alice's requests"),
    Person(id="U0CAROL", name="carol", role="asks; answers her own requests"),
]
CHANNELS = [Channel(id=CHANNEL, name="ops"), Channel(id="C0GENERAL", name="general")]
DELTA_DELAY = 0.12
"""Seconds between the scripted model's chunks: slow enough to watch a reply grow."""


async def run_sandbox(port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> int:
    with tempfile.TemporaryDirectory(prefix="bot-sandbox-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'sandbox.db'}"
        model = ScriptedModel(responder=sandbox_reply, delta_delay=DELTA_DELAY, keep_requests=False)
        async with offline_slack(url, model) as offline:
            page = SandboxPage(offline.standin, offline.driver, people=PEOPLE, channels=CHANNELS)
            try:
                server = BackgroundServer(page.app, host=host, port=port)
            except OSError as err:
                print(
                    f"bot sandbox: cannot listen on {host}:{port}: {err.strerror}", file=sys.stderr
                )
                return 2
            await server.start()
            print(f"sandbox: open {server.url}/  (offline: no token, no network; Ctrl-C stops)")
            print(f"database: {url} (deleted at exit)", flush=True)
            try:
                await _until_signalled()
            finally:
                await server.stop()
    return 0


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):  # not on Windows' loops
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
