"""The bot's `/metrics` and `/readyz` on its HTTP port: a mention through the Slack stand-in
shows as a turn, tokens, tool calls and steps; the token guards the scrape; a Slack 429 is
counted by method. And `bot socket`, which serves no HTTP of its own, on `METRICS_PORT`."""

from __future__ import annotations

import contextlib
import os
import signal
import socket as _socket
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import TurnStatus
from bot.slack.inbound import session_key
from bot.testing.http import local_client
from bot.testing.socket_mode import APP_TOKEN
from tests.bot.agents import AGENT, LOOKUP, SIMPLE, model
from tests.bot.harness import TOKEN, eventually
from tests.support import children

CHANNEL = "C0METRICS"
METRICS_TOKEN = "scrape-token-for-the-bot-test"
AUTH = {"Authorization": f"Bearer {METRICS_TOKEN}"}


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def total(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(
        value
        for sample, have, value in samples(text)
        if sample == name and all(have.get(k) == v for k, v in labels.items())
    )


async def _completed(app: Any, key: str) -> bool:
    turns = await app.turns(key)
    return bool(turns) and turns[0].status == TurnStatus.COMPLETED


async def test_a_mention_shows_in_metrics(db_url, launch):
    app = await launch(db_url, AGENT, model(LOOKUP), METRICS_TOKEN=METRICS_TOKEN)
    ts = await app.slack.mention("U0ALICE", "what is order 42?", channel=CHANNEL)
    key = session_key("T0DEMO", CHANNEL, ts)
    await eventually(lambda: _completed(app, key), within=30, what="the turn completed")

    async with local_client(base_url=app.server.url) as http:
        assert (await http.get("/metrics")).status_code == 401
        wrong = await http.get("/metrics", headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == 401
        scraped = await http.get("/metrics", headers=AUTH)
        ready = await http.get("/readyz")
    assert scraped.status_code == 200
    text = scraped.text
    assert total(text, "bot_turns_total", agent="test-ops", outcome="completed") == 1
    assert total(text, "bot_turn_duration_seconds_count", agent="test-ops") == 1
    # Two model calls of the scripted model's default usage (10 in, 5 out each).
    assert total(text, "bot_model_tokens_total", kind="input") == 20
    assert total(text, "bot_model_tokens_total", kind="output") == 10
    assert total(text, "bot_model_calls_total", outcome="ok") == 2
    ok = {"agent": "test-ops", "tool": "lookup_order", "outcome": "ok"}
    assert total(text, "bot_tool_calls_total", **ok) == 1
    assert total(text, "bot_step_duration_seconds_count", kind="tool") >= 1
    assert total(text, "bot_database_up") == 1
    assert "T0DEMO" not in text  # no session key in a label
    assert "U0ALICE" not in text
    assert ready.status_code == 200
    assert ready.json() == {"ready": True}


async def test_a_slack_429_is_counted(db_url, launch, standin):
    standin.fail("chat.startStream", "ratelimited", times=1, retry_after=1)
    app = await launch(db_url, AGENT, model(SIMPLE))
    ts = await app.slack.mention("U0ALICE", "hello", channel=CHANNEL)
    key = session_key("T0DEMO", CHANNEL, ts)
    await eventually(lambda: _completed(app, key), within=30, what="the turn completed")

    async def counted() -> str | None:
        async with local_client(base_url=app.server.url) as http:
            text = (await http.get("/metrics")).text  # no METRICS_TOKEN: open
        limited = total(text, "bot_slack_api_rate_limited_total", method="chat.startStream")
        return text if limited >= 1 else None

    text = await eventually(counted, within=30, what="the 429 counted")
    assert total(text, "bot_slack_api_rate_limited_total", method="chat.startStream") == 1
    assert (
        total(text, "bot_slack_api_errors_total", method="chat.startStream", error="ratelimited")
        == 1
    )


async def test_bot_socket_serves_them_on_metrics_port(db_url, standin, socket, tmp_path):
    with contextlib.closing(_socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_APP_TOKEN": APP_TOKEN,
        "SLACK_API_URL": standin.api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-key-not-used-0000",
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": str(port),
    }
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | env
    log = tmp_path / "socket.log"
    with log.open("wb") as out:
        proc = await children.start("bot.cli.main", "socket", env=env, stdout=out, stderr=out)
    try:
        await socket.connected(1, within=60)

        async def scraped() -> str | None:
            if proc.returncode is not None:
                pytest.fail(f"bot socket exited {proc.returncode}:\n{log.read_text()}")
            try:
                async with local_client(base_url=f"http://127.0.0.1:{port}") as http:
                    answer = await http.get("/metrics")
                    ready = await http.get("/readyz")
            except httpx.TransportError:
                return None
            assert ready.json() == {"ready": True}
            return answer.text

        text = await eventually(scraped, within=60, what="the socket process's ops port")
        assert total(text, "bot_database_up") == 1
        proc.send_signal(signal.SIGTERM)
        await eventually(lambda: proc.returncode is not None, within=30, what="it stopped")
        assert proc.returncode == 0, log.read_text()
    finally:
        await children.stop(proc)
