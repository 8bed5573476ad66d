"""`bot serve` with `WEB_CONCURRENCY=2`: one scrape, answered by either web process, sums what
both counted (prometheus_client's multiprocess mode, in the directory `bot serve` prepares)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from bot.testing import SlackDriver
from bot.testing.http import local_client
from tests.bot.harness import SECRET, TOKEN, eventually
from tests.bot.test_ack_path import serving
from tests.bot.test_metrics_bot import total

ERRORS = "bot_slack_api_errors_total"
REFUSAL = {"method": "views.publish", "error": "not_authed"}


def _per_process(directory: Path, scratch: Path) -> list[float]:
    """What each process counted: its own files read alone."""
    counted = []
    for n, path in enumerate(sorted(directory.glob("counter_*.db"))):
        alone = scratch / str(n)
        alone.mkdir(parents=True)
        shutil.copy(path, alone / path.name)
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=str(alone))
        counted.append(registry.get_sample_value(ERRORS, REFUSAL) or 0.0)
    return counted


async def test_one_scrape_sums_every_web_process(db_url, standin, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"left by an earlier run")  # emptied at start
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET,
        "SLACK_API_URL": standin.api_url,
        "ANTHROPIC_API_KEY": "sk-ant-test-unused",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_CONCURRENCY": "2",
        "RUN_TURNS": "false",
        "PROMETHEUS_MULTIPROC_DIR": str(directory),
    }
    env.pop("REDIS_URL", None)
    # Every Home tab publish is refused: each process that handles an opening counts one.
    standin.fail("views.publish", "error:not_authed", times=10_000)
    log = tmp_path / "serve.log"
    base = f"http://127.0.0.1:{port}"
    async with serving(env, log) as proc:

        async def up() -> bool:
            if proc.returncode is not None:
                pytest.fail(f"bot serve exited {proc.returncode}:\n{log.read_text()}")
            try:
                async with local_client() as http:
                    return (await http.get(f"{base}/healthz")).status_code == 200
            except httpx.TransportError:
                return False

        await eventually(up, within=60, what="bot serve answers")
        sent = 0

        async def both_counted() -> bool:
            nonlocal sent
            # A fresh connection per opening: either process may accept it.
            async with SlackDriver(base, SECRET, standin=standin) as slack:
                (await slack.open_home(f"U0USER{sent:03d}")).raise_for_status()
            sent += 1
            counted = _per_process(directory, tmp_path / f"scratch-{sent}")
            return sum(1 for c in counted if c > 0) >= 2

        await eventually(both_counted, within=90, what="both web processes counted a refusal")

        async def all_counted() -> bool:
            return (
                sum(_per_process(directory, tmp_path / f"all-{sent}-{os.urandom(4).hex()}")) == sent
            )

        await eventually(all_counted, within=30, what="every publish counted")
        for _ in range(6):  # whichever process answers, the total is everyone's
            async with local_client() as http:
                scraped = await http.get(f"{base}/metrics")
            assert scraped.status_code == 200, scraped.text
            assert total(scraped.text, ERRORS, **REFUSAL) == sent
        proc.send_signal(signal.SIGTERM)
        assert await eventually(lambda: proc.returncode is not None, within=30)
    assert "left by an earlier run" not in "".join(
        p.read_text(errors="replace") for p in directory.glob("*.db")
    )
