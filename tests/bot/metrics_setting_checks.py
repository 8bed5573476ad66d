"""The metrics settings' check (see `tests.bot.setting_checks`): `METRICS_HOST`,
`METRICS_PORT` and `METRICS_TOKEN` reach the ops server `bot worker` runs: it listens on that
host and port, and its `/metrics` answers only that token."""

from __future__ import annotations

import socket

import httpx

from bot.cli import commands
from bot.core.settings import Settings
from bot.testing.http import local_client
from tests.bot.setting_context import Ctx

HOST = "127.0.0.2"
METRICS_TOKEN = "every-setting-metrics-token"


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


async def metrics(ctx: Ctx) -> None:
    await ctx.slack_env()
    port = _free_port(HOST)
    ctx.set(METRICS_HOST=HOST, METRICS_PORT=str(port), METRICS_TOKEN=METRICS_TOKEN)
    seen: dict[str, int] = {}

    async def scrape_instead_of_waiting() -> None:
        async with local_client(base_url=f"http://{HOST}:{port}") as http:
            seen["open"] = (await http.get("/metrics")).status_code
            auth = {"Authorization": f"Bearer {METRICS_TOKEN}"}
            seen["token"] = (await http.get("/metrics", headers=auth)).status_code
            seen["ready"] = (await http.get("/readyz")).status_code
        try:  # bound to METRICS_HOST alone, not every address
            async with local_client(base_url=f"http://127.0.0.1:{port}") as http:
                await http.get("/healthz")
            seen["other host"] = 200
        except httpx.ConnectError:
            seen["other host"] = 0

    ctx.env.setattr(commands, "_until_signalled", scrape_instead_of_waiting)
    ctx.env.setattr(commands, "freeze_startup_heap", lambda: None)
    assert await commands.worker(Settings()) == 0
    assert seen == {"open": 401, "token": 200, "ready": 200, "other host": 0}
