"""The bot as a separate process, for the API's two-process tests: `web` is `bot serve` with
`RUN_TURNS=false` (prints `PORT <n>` once it listens), `worker` is `bot worker` (prints
`PORT 0` once it runs). The API's settings (`API_TOKENS`, ...) and `REDIS_URL` come from the
environment, as they do for `bot serve`.

    python -m tests.api.api_child DATABASE_URL SLACK_API_URL GATE_DIR --role web|worker

The model calls `file_gate`, a tool that waits until the file `GATE_DIR/open` exists: a long
call the test ends from outside the process.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

from agent import Agent, ScriptedModel, ScriptedReply, ToolCall, tool
from bot.app import open_bot
from bot.core.asgi_server import BackgroundServer
from bot.slack.rendering import RenderSettings
from tests.bot.harness import settings_for

GATE_DIR: list[Path] = []


@tool
async def file_gate(name: str) -> dict[str, Any]:
    """Waits until the test creates the gate file (a long remote call)."""
    gate = GATE_DIR[0] / name
    while not await asyncio.to_thread(gate.exists):  # noqa: ASYNC110 (set by another process)
        await asyncio.sleep(0.05)
    return {"opened": name}


AGENT = Agent(name="api-child", instructions="Help.", tools=[file_gate])
SCRIPT = [
    ScriptedReply(
        text=["Working ", "on it."],
        tool_calls=[ToolCall(id="c_gate", name="file_gate", input={"name": "open"})],
    ),
    ScriptedReply(text=["Done ", "after ", "the gate."]),
]
"""Typed a word each 0.2 s (`DELTA_DELAY`): long enough for a reader that just connected
to be listening (over Redis) before the last words."""
DELTA_DELAY = 0.2


class _Api:
    def __init__(self, api_url: str) -> None:
        self.api_url = api_url


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("api_url")
    parser.add_argument("gate_dir")
    parser.add_argument("--role", choices=["web", "worker"], required=True)
    args = parser.parse_args()
    GATE_DIR.append(Path(args.gate_dir))
    bot = await open_bot(
        settings_for(args.url, _Api(args.api_url), RUN_TURNS=args.role == "worker"),  # type: ignore[arg-type]
        agent=AGENT,
        model=ScriptedModel(SCRIPT, delta_delay=DELTA_DELAY),
        render_settings=RenderSettings(flush_interval=0.1, poll_interval=0.1, lease_ttl=2.0),
        runtime_options={"lease_ttl": 2.0, "recovery_interval": 0.2, "poll_interval": 0.05},
        worker=args.role == "worker",
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if args.role == "worker":
        await bot.start()
        try:
            _say("PORT 0")
            await stop.wait()
        finally:
            await bot.close()
        return 0
    async with BackgroundServer(bot.http_app()) as server:
        _say(f"PORT {server.port}")
        await stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
