"""`bot serve --offline`, a first run with nothing made by hand: a real `bot serve` process with
no Slack workspace and no Anthropic key, driven over HTTP as a new user would with curl.

In Slack (the stand-in inside the process, through its offline routes): an order is placed, a
refund asks the requester a question (the example agent's parking tool) and then proposes the
refund, and both answers pay it through the payments stand-in. Over the HTTP turn API: a turn
parks, is resumed with its digest, proposes the refund, and the confirmation pays it. It says it
is offline (a WARNING, `/healthz`), scrubs the token it generated, and stops cleanly.
"""

from __future__ import annotations

import contextlib
import re
import signal
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.core.settings import CREDENTIALS
from bot.testing.http import local_client
from tests.bot.harness import eventually
from tests.support import children

API_TOKEN = "offline-test-api-token-0001"
ALICE = "U0ALICE"
ORDER = re.compile(r"ord_[0-9a-f]{12}")


@dataclass
class Offline:
    proc: children.Process
    base: str
    log: Path
    http: httpx.AsyncClient

    async def post(self, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
        return await self.http.post(f"{self.base}{path}", json=body, headers=headers)

    async def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = await self.http.request(
            method,
            f"{self.base}{path}",
            json=body,
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
        assert answer.status_code in (200, 202), answer.text
        return answer.json()

    async def thread(self, ts: str) -> dict[str, Any]:
        answer = await self.http.get(f"{self.base}/offline/slack/threads/C0OPS/{ts}")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    async def agent_says(self, ts: str, pattern: str) -> dict[str, Any]:
        """The bot's finished message in the thread matching `pattern` (once it is there)."""

        async def found() -> dict[str, Any] | None:
            for message in (await self.thread(ts))["messages"]:
                done = message["from"] == "agent" and not message["streaming"]
                if done and re.search(pattern, message["text"] + " ".join(message["buttons"])):
                    return dict(message)
            return None

        try:
            return dict(await eventually(found, within=60))
        except TimeoutError:
            pytest.fail(f"no reply matching {pattern!r}:\n{(await self.thread(ts))['shown']}")

    async def turn_ends(self, session: str, turn_id: str) -> dict[str, Any]:
        async def ended() -> dict[str, Any] | None:
            turn = await self.api("GET", f"/sessions/{session}/turns/{turn_id}")
            return dict(turn) if turn["status"] in ("completed", "failed", "suspended") else None

        return dict(await eventually(ended, within=60))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
async def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[Offline]:
    """`bot serve --offline` on a fresh SQLite file nobody migrated, with no credential set
    (unset, not empty: Bolt takes an empty `SLACK_CLIENT_ID` for one) and no `HOST` (so it
    listens on 127.0.0.1)."""
    for name in (*CREDENTIALS, "HOST", "REDIS_URL", "BOT_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    port = _free_port()
    env = {
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'first-run.db'}",
        "PORT": str(port),
        "API_TOKENS": f'{{"{API_TOKEN}": {{"team": "T0DEMO", "user": "{ALICE}"}}}}',
        "LOG_FORMAT": "text",
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = await children.start(
            "bot.cli.main", "serve", "--offline", env=env, stdout=out, stderr=out, group=True
        )
    base = f"http://127.0.0.1:{port}"
    try:
        async with local_client(timeout=30) as http:
            running = Offline(proc=proc, base=base, log=log, http=http)

            async def healthy() -> Any:
                assert proc.returncode is None, f"bot serve exited:\n{log.read_text()}"
                with contextlib.suppress(httpx.TransportError):
                    answer = await http.get(f"{base}/healthz")
                    return answer.json() if answer.status_code == 200 else None
                return None

            health = await eventually(healthy, within=90, what="the offline bot answering")
            assert health["ok"] is True
            assert health["offline"] is True
            assert "OFFLINE MODE" in health["warning"]
            yield running
            proc.send_signal(signal.SIGTERM)
            # One uvicorn process raises the signal again once it has shut down gracefully.
            assert await proc.wait() in (0, -signal.SIGTERM), log.read_text()
    finally:
        await children.kill_group(proc)


async def test_a_slack_thread_places_an_order_parks_and_pays_a_refund(offline: Offline) -> None:
    """A Deny (its reason typed in the bot's modal) proposes nothing; a yes proposes the
    refund, and its approval pays it."""
    said = await offline.post(
        "/offline/slack/messages", {"user": ALICE, "text": "order 2 blue mugs"}
    )
    assert said.status_code == 200, said.text
    placed = await offline.agent_says(said.json()["ts"], r"Placed order ord_")
    order = ORDER.search(placed["text"])
    assert order is not None

    asking = {"user": ALICE, "text": f"refund {order.group(0)}, it arrived broken"}
    first = (await offline.post("/offline/slack/messages", asking)).json()["ts"]
    question = await offline.agent_says(first, r"Does the customer keep it")
    no = {
        "user": ALICE,
        "channel": "C0OPS",
        "message_ts": question["ts"],
        "approve": False,
        "reason": "it goes back first",
    }
    assert (await offline.post("/offline/slack/answers", no)).status_code == 200
    await offline.agent_says(first, r"you said: “it goes back first”.*no refund on ord_")

    thread = (await offline.post("/offline/slack/messages", asking)).json()["ts"]
    question = await offline.agent_says(thread, r"Does the customer keep it")
    assert question["buttons"] == ["Approve", "Deny"]
    refused = await offline.post(
        "/offline/slack/answers",
        {"user": "U0BOB", "channel": "C0OPS", "message_ts": question["ts"], "approve": True},
    )
    assert refused.status_code == 200  # the bot refuses bob (an ephemeral), not this route
    yes = {"user": ALICE, "channel": "C0OPS", "message_ts": question["ts"], "approve": True}
    assert (await offline.post("/offline/slack/answers", yes)).status_code == 200

    proposal = await offline.agent_says(thread, r"Allow issue_refund")
    assert proposal["ts"] != question["ts"]
    assert proposal["buttons"] == ["Approve", "Deny", "Edit & approve"]  # the amount is editable
    approve = {**yes, "message_ts": proposal["ts"]}
    assert (await offline.post("/offline/slack/answers", approve)).status_code == 200
    await offline.agent_says(thread, r"Refunded \$37\.00 on ord_")


async def test_an_api_turn_parks_is_resumed_and_its_refund_confirmed(offline: Offline) -> None:
    placed = await offline.api("POST", "/sessions/first/turns", {"text": "order 1 blue mug"})
    assert placed["status"] == "completed", placed
    order = ORDER.search(placed["text"])
    assert order is not None

    parked = await offline.api(
        "POST", "/sessions/first/turns", {"text": f"refund {order.group(0)}, it arrived broken"}
    )
    if parked["status"] == "running":
        parked = await offline.turn_ends("first", parked["turn_id"])
    assert parked["status"] == "suspended", parked
    request = parked["request"]
    assert request["tool"] == "ask_requester"
    assert request["answerers"] == {"user": ALICE}

    answer = {
        "turn_id": parked["turn_id"],
        "input_id": request["id"],
        "value": True,
        "digest": request["digest"],
    }
    await offline.api("POST", "/sessions/first/resume", answer)
    resumed = await offline.turn_ends("first", parked["turn_id"])
    assert resumed["status"] == "completed", resumed
    assert "waits for approval" in resumed["text"]

    pending = await offline.api("GET", "/sessions/first/pending")
    [proposed] = pending["confirmations"]
    confirmed = await offline.api(
        "POST", f"/sessions/first/confirmations/{proposed['confirmation_id']}", {"accepted": True}
    )
    paid = await offline.turn_ends("first", confirmed["turn_id"])
    assert paid["status"] == "completed", paid
    assert re.search(r"Refunded \$18\.50 on ord_.* \(refund re_", paid["text"]), paid["text"]

    log = offline.log.read_text()
    assert any("WARNING" in line and "OFFLINE MODE" in line for line in log.splitlines())
    assert "xoxb-offline-" not in log, "the generated bot token reached the log"
    assert API_TOKEN not in log


async def test_offline_beside_a_real_token_is_refused_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in (*CREDENTIALS, "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    token = "xoxb-2222-3333-aRealWorkspaceToken"
    env = {
        "DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        "SLACK_BOT_TOKEN": token,
        "BOT_OFFLINE": "true",
    }
    ran = await children.run("bot.cli.main", "serve", env=env)
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == [ran.stderr.strip()], "one line"
    assert "SLACK_BOT_TOKEN is set" in ran.stderr
    assert token not in ran.stderr + ran.stdout
    assert not (tmp_path / "bot.db").exists(), "refused before anything was opened"
