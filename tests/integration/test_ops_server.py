"""The ops endpoints of a process that serves no HTTP of its own (`bot worker`, `bot clock`,
`bot socket`): `/metrics` behind its token, `/healthz`, `/readyz` naming what is not ready, a
server that stops when asked, and `bot worker` serving them on `METRICS_PORT`."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bot.core.metrics import BotMetrics
from bot.core.ops_server import Ops, OpsServer
from bot.testing import SlackStandIn
from bot.testing.http import local_client
from storage import SqlStore
from tests.bot.harness import eventually
from tests.support import children
from tests.support.tcp_proxy import TcpProxy

TOKEN = "metrics-token-for-the-test"


async def _health(request: Request) -> Response:
    return JSONResponse({"ok": True})


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def _store_that_can_go(url: str) -> AsyncIterator[tuple[SqlStore, Callable[[], Any]]]:
    """A store and what takes its database away: PostgreSQL behind a proxy the test cuts; a
    SQLite store closed under the process (its queries then never answer)."""
    if not url.startswith("postgresql"):
        store = await SqlStore.open(url)
        closed: list[bool] = []

        async def close() -> None:
            closed.append(True)
            await store.close()

        try:
            yield store, close
        finally:
            if not closed:  # a second close would wait for ever
                await store.close()
        return
    parsed = make_url(url)
    proxy = await TcpProxy.start(parsed.host or "127.0.0.1", parsed.port or 5432)
    via = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    store = await SqlStore.open(via)

    async def cut() -> None:
        proxy.cut()

    try:
        yield store, cut
    finally:
        await proxy.restore()
        await store.close()
        await proxy.close()


async def test_metrics_healthz_readyz_and_a_clean_stop(sql_url: str) -> None:
    metrics = BotMetrics()
    metrics.slack_failed("chat.postMessage", "not_in_channel")
    async with _store_that_can_go(sql_url) as (store, take_away):
        ops = Ops(metrics=metrics, store=store, redis_url=None, token=TOKEN, gauge_ttl=0.0)
        server = await OpsServer(ops, _health, host="127.0.0.1", port=0).start()
        try:
            async with local_client(base_url=server.url) as http:
                assert (await http.get("/healthz")).json() == {"ok": True}
                assert (await http.get("/readyz")).json() == {"ready": True}
                assert (await http.get("/metrics")).status_code == 401
                wrong = await http.get("/metrics", headers={"Authorization": "Bearer nope"})
                assert wrong.status_code == 401
                auth = {"Authorization": f"Bearer {TOKEN}"}
                scraped = await http.get("/metrics", headers=auth)
                assert scraped.status_code == 200
                assert "bot_database_up 1.0" in scraped.text
                assert "bot_queued_turns 0.0" in scraped.text
                assert 'error="not_in_channel",method="chat.postMessage"} 1.0' in scraped.text

                await take_away()
                ready = await http.get("/readyz")
                assert ready.status_code == 503
                assert ready.json() == {"ready": False, "not_ready": {"database": "unreachable"}}
                scraped = await http.get("/metrics", headers=auth)
                assert scraped.status_code == 200
                assert "bot_database_up 0.0" in scraped.text
                assert "bot_queued_turns" not in scraped.text
        finally:
            await server.stop()
            await ops.close()
    with pytest.raises(httpx.ConnectError):
        async with local_client(base_url=server.url) as http:
            await http.get("/healthz")


async def test_readyz_names_a_schema_the_code_does_not_know(sqlite_url: str) -> None:
    store = await SqlStore.open(sqlite_url)
    ops = Ops(metrics=BotMetrics(), store=store, redis_url=None, token=None)
    try:
        await store.run_sync(
            lambda c: c.execute(text("UPDATE alembic_version SET version_num = 'rolled-back'")),
            write=True,
        )
        async with (
            OpsServer(ops, _health, host="127.0.0.1", port=0) as server,
            local_client(base_url=server.url) as http,
        ):
            ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["not_ready"] == {
            "database": "not at this code's schema (run `bot db upgrade`)"
        }
        assert "sqlite" not in ready.text  # no URL, no path
    finally:
        await ops.close()
        await store.close()


async def test_readyz_pings_redis_where_it_is_configured(sqlite_url: str, redis_url: str) -> None:
    store = await SqlStore.open(sqlite_url)
    dead = f"redis://:hunter2@127.0.0.1:{_free_port()}/0"
    up = Ops(metrics=BotMetrics(), store=store, redis_url=redis_url, token=None)
    down = Ops(metrics=BotMetrics(), store=store, redis_url=dead, token=None)
    try:
        assert await up.readiness.problems() == {}
        assert await down.readiness.problems() == {"redis": "unreachable"}
        async with (
            OpsServer(down, _health, host="127.0.0.1", port=0) as server,
            local_client(base_url=server.url) as http,
        ):
            ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert "hunter2" not in ready.text
        assert "127.0.0.1" not in ready.text
    finally:
        await up.close()
        await down.close()
        await store.close()


@pytest.mark.parametrize("command", ["worker", "clock"])
async def test_the_command_serves_them_on_metrics_port(
    command: str, sql_url: str, tmp_path: Path
) -> None:
    """`bot socket` needs a Socket Mode stand-in to start at all: its test is in
    `tests/bot/test_metrics_bot.py`."""
    port = _free_port()
    async with SlackStandIn() as standin:
        env = {
            "DATABASE_URL": sql_url,
            "SLACK_BOT_TOKEN": "xoxb-ops-server-test",
            "SLACK_SIGNING_SECRET": "ops-server-test-secret",
            "SLACK_API_URL": standin.api_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-unused",
            "METRICS_HOST": "127.0.0.1",
            "METRICS_PORT": str(port),
            "METRICS_TOKEN": TOKEN,
        }
        env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"} | env
        log = tmp_path / f"{command}.log"
        with log.open("wb") as out:
            proc = await children.start("bot.cli.main", command, env=env, stdout=out, stderr=out)
        try:
            base = f"http://127.0.0.1:{port}"

            async def answers() -> bool:
                if proc.returncode is not None:
                    pytest.fail(f"bot {command} exited {proc.returncode}:\n{log.read_text()}")
                try:
                    async with local_client(base_url=base) as http:
                        return (await http.get("/healthz")).status_code == 200
                except httpx.TransportError:
                    return False

            await eventually(answers, within=60, what=f"the {command}'s ops port")
            async with local_client(base_url=base) as http:
                assert (await http.get("/readyz")).json() == {"ready": True}
                assert (await http.get("/metrics")).status_code == 401
                scraped = await http.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
            assert scraped.status_code == 200
            assert "bot_database_up 1.0" in scraped.text
            assert "bot_turns_total" in scraped.text  # the family is declared before any turn
            proc.send_signal(signal.SIGTERM)
            assert await eventually(lambda: proc.returncode is not None, within=30)
            assert proc.returncode == 0, log.read_text()
        finally:
            await children.stop(proc)
        assert TOKEN not in log.read_text()


async def test_a_metrics_port_already_taken_is_said_in_one_line(
    sql_url: str, tmp_path: Path
) -> None:
    """Not a traceback: the operator reads which setting to change."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        async with SlackStandIn() as standin:
            env = {
                **{k: v for k, v in os.environ.items() if k != "REDIS_URL"},
                "DATABASE_URL": sql_url,
                "SLACK_BOT_TOKEN": "xoxb-ops-server-test",
                "SLACK_API_URL": standin.api_url,
                "ANTHROPIC_API_KEY": "sk-ant-test-unused",
                "METRICS_HOST": "127.0.0.1",
                "METRICS_PORT": str(port),
            }
            log = tmp_path / "worker.log"
            with log.open("wb") as out:
                proc = await children.start(
                    "bot.cli.main", "worker", env=env, stdout=out, stderr=out
                )
            try:
                assert await eventually(lambda: proc.returncode is not None, within=60)
            finally:
                await children.stop(proc)
    finally:
        taken.close()
    said = log.read_text()
    assert proc.returncode == 2, said
    assert f"METRICS_PORT {port}" in said
    assert "Traceback" not in said
