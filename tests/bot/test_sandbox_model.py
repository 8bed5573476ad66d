"""Which model `bot sandbox` runs, and that it says so: with `ANTHROPIC_API_KEY` set it is Claude,
built from the `ANTHROPIC_*` settings as `bot serve` builds it (here pointed at the Anthropic
stand-in through `ANTHROPIC_BASE_URL`), named on the command line and in the page's header;
without a key, or with `.env.example`'s placeholder, the scripted model, also named. A real
`bot sandbox` process, driven over the page's own JSON endpoints (the browser test drives the
page itself, in `tests/sandbox/`)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from agent.models import DEFAULT_MODEL
from bot.cli.demo import CHANNEL
from bot.testing.http import local_client
from tests.bot.harness import eventually
from tests.support import children
from tests.support.anthropic_standin import AnthropicStandin, Text, sse_reply

KEY = "sk-ant-api03-sandbox-test-key"
REPLY = "Hello from the Claude stand-in."


@dataclass
class Sandbox:
    url: str
    printed: list[str]
    http: httpx.AsyncClient

    async def say(self, text: str) -> None:
        body = {"as": "U0ALICE", "channel": CHANNEL, "text": text}
        answer = await self.http.post(f"{self.url}/api/say", json=body)
        assert answer.status_code == 200, answer.text

    async def replied(self, text: str) -> dict[str, Any]:
        async def found() -> dict[str, Any] | None:
            state = (await self.http.get(f"{self.url}/api/state?as=U0ALICE")).json()
            [ops] = [c for c in state["channels"] if c["id"] == CHANNEL]
            done = [m for m in ops["messages"] if m["bot"] and not m["streaming"]]
            return next((m for m in done if text in m["text"]), None)

        return dict(await eventually(found, within=60, what=f"a reply saying {text!r}"))


@pytest.fixture
def api() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as standin:
        yield standin


@contextlib.asynccontextmanager
async def sandbox(monkeypatch: pytest.MonkeyPatch, **env: str) -> AsyncIterator[Sandbox]:
    """`bot sandbox --port 0`, once it printed its URL, model and database."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"):
        monkeypatch.delenv(name, raising=False)
    proc = await children.start("bot.cli.main", "sandbox", "--port", "0", env=env, group=True)
    try:
        printed = [await children.wait_line(proc, "sandbox: open ", within=90)]
        printed.append(await children.wait_line(proc, "model: "))
        url = next(w for w in printed[0].split() if w.startswith("http://127.0.0.1:"))
        async with local_client(timeout=30) as http:
            yield Sandbox(url=url.rstrip("/"), printed=printed, http=http)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 30) == 0
    finally:
        await children.kill_group(proc)


async def test_with_a_key_the_sandbox_runs_claude_and_says_so(
    monkeypatch: pytest.MonkeyPatch, api: AnthropicStandin
) -> None:
    api.enqueue(sse_reply(Text(REPLY)))
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": api.base_url}
    async with sandbox(monkeypatch, **env) as box:
        assert box.printed[1].strip() == f"model: Claude, {DEFAULT_MODEL} at {api.base_url}"
        assert "the model online" in box.printed[0]
        page = (await box.http.get(f"{box.url}/")).text
        assert f"Claude, {DEFAULT_MODEL}" in page
        assert "offline scripted model" not in page
        await box.say("hello, who is answering?")
        await box.replied(REPLY)
    [sent] = api.requests
    assert sent.credential == KEY
    assert "You help the ops team" in sent.body["system"][0]["text"]
    assert "hello, who is answering?" in str(sent.body["messages"][-1])


@pytest.mark.parametrize(
    "key", ["", "REPLACE-with-the-anthropic-api-key"], ids=["unset", "placeholder"]
)
async def test_without_a_key_the_sandbox_runs_the_scripted_model_and_says_so(
    monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    async with sandbox(monkeypatch, ANTHROPIC_API_KEY=key) as box:
        assert box.printed[1].startswith("model: the scripted model (offline;")
        assert "no token, no network" in box.printed[0]
        assert "offline scripted model" in (await box.http.get(f"{box.url}/")).text
        await box.say("hello")
        await box.replied("I am the sandbox's scripted model")
