"""The console's actions are the CLI's: a receipt resolved as `bot receipts resolve` resolves
it (the CLI then lists it settled), a turn ended as `bot cancel --turn` ends it, each audited
with the operator's name; an operator of another workspace can reach neither, even by forging
the request. And a session's live timeline: the durable log after `Last-Event-ID`, then what
another process commits, over SSE."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

from agent import ReceiptStatus, Runtime, ScriptedModel, ScriptedReply, TurnStatus
from storage import SqlStore
from tests.api.conftest import (  # noqa: F401  (fixtures)
    _loop_never_blocked,
    bots,
    db_url,
    launch,
    picked_db_url,
    standin,
)
from tests.bot.harness import eventually
from tests.console.console_fixtures import Console, console  # noqa: F401
from tests.console.seed import AGENT, said
from tests.support import children

RESOLVE = "/console/api/receipts/resolve"
CANCEL = "/console/api/turns/cancel"


async def _audit(served: Console) -> list[dict[str, Any]]:
    root = await served.login("root")
    entries: list[dict[str, Any]] = (await root.get("/console/api/audit")).json()["entries"]
    return entries


async def test_resolve_is_bot_receipts_resolve(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    ana = await console.login("ana")
    body = {"session": t1.paying, "key": t1.receipt_key, "outcome": "failed", "note": "not there"}
    done = await ana.post(RESOLVE, body)
    assert (done.status_code, done.json()) == (200, {"ok": True})
    listed = await children.run(
        "bot.cli.main", "receipts", "list", "--json", "--database-url", console.db_url
    )
    assert listed.returncode == 0, listed.stderr
    records = {(r["session"], r["key"]): r for r in map(json.loads, listed.stdout.splitlines())}
    assert records[(t1.paying, t1.receipt_key)]["status"] == "failed"
    assert records[(console.seeded.t2.paying, t1.receipt_key)]["status"] == "uncertain"
    again = await ana.post(RESOLVE, {**body, "outcome": "completed"})
    assert again.status_code == 409
    remaining = (await ana.get("/console/api/receipts?status=uncertain")).json()["receipts"]
    assert remaining == []
    [entry] = [e for e in await _audit(console) if e["action"] == "receipt.resolve"]
    assert (entry["who"], entry["target"]) == ("ana", t1.paying)
    assert entry["detail"] == {"key": t1.receipt_key, "outcome": "failed", "note": "not there"}
    assert entry["at"] > 0


async def test_resolve_as_completed(console: Console) -> None:  # noqa: F811
    t2 = console.seeded.t2
    bob = await console.login("bob")
    body = {"session": t2.paying, "key": t2.receipt_key, "outcome": "completed", "note": ""}
    assert (await bob.post(RESOLVE, body)).status_code == 200
    store = await SqlStore.open(console.db_url)
    try:
        receipt = await store.get_receipt(t2.paying, t2.receipt_key)
    finally:
        await store.close()
    assert receipt is not None
    assert receipt.status == ReceiptStatus.COMPLETED
    bad = await bob.post(RESOLVE, {**body, "outcome": "maybe"})
    assert bad.status_code == 400
    unknown = await bob.post(RESOLVE, {**body, "key": "charge:o-404"})
    assert unknown.status_code == 404


async def test_another_workspace_cannot_act(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    bob = await console.login("bob")
    forged = await bob.post(
        RESOLVE, {"session": t1.paying, "key": t1.receipt_key, "outcome": "completed"}
    )
    assert (forged.status_code, forged.json()) == (404, {"error": "no such session"})
    cancelled = await bob.post(CANCEL, {"session": t1.stuck, "turn_id": t1.stuck_turn})
    assert (cancelled.status_code, cancelled.json()) == (404, {"error": "no such session"})
    # Nothing changed: T1's receipt is still uncertain, its turn still queued.
    ana = await console.login("ana")
    [receipt] = (await ana.get("/console/api/receipts?status=uncertain")).json()["receipts"]
    assert receipt["session"] == t1.paying
    assert [t.status for t in await console.bot.turns(t1.stuck)] == [TurnStatus.QUEUED]
    assert not [e for e in await _audit(console) if e["action"] != "login"]


async def test_cancel_is_bot_cancel(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    ana = await console.login("ana")
    done = await ana.post(
        CANCEL, {"session": t1.stuck, "turn_id": t1.stuck_turn, "reason": "nobody home"}
    )
    assert done.status_code == 200, done.text
    assert done.json() == {"ok": True, "cancelled": [t1.stuck_turn]}
    [asked] = await console.bot.turns(t1.stuck)
    assert asked.cancel_reason == "nobody home"  # asked durably; the worker ends it
    assert (await ana.get("/console/api/stuck?older_than=0")).json()["turns"] == []
    await _worker_runs(console, t1.stuck)
    [turn] = await console.bot.turns(t1.stuck)
    assert turn.status == TurnStatus.CANCELLED
    assert turn.cancel_reason == "nobody home"
    assert turn.cancelled_by == "operator"  # the thread says "stopped by an operator"
    again = await ana.post(CANCEL, {"session": t1.stuck, "turn_id": t1.stuck_turn})
    assert again.status_code == 409
    unknown = await ana.post(CANCEL, {"session": t1.stuck, "turn_id": "no-such-turn"})
    assert unknown.status_code == 404
    assert (await ana.get("/console/api/stuck?older_than=0")).json()["turns"] == []
    [entry] = [e for e in await _audit(console) if e["action"] == "turn.cancel"]
    assert (entry["who"], entry["target"]) == ("ana", t1.stuck)
    assert entry["detail"]["turn_id"] == t1.stuck_turn
    assert entry["detail"]["reason"] == "nobody home"


async def test_cancel_a_parked_turn(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    ana = await console.login("ana")
    done = await ana.post(CANCEL, {"session": t1.parked, "turn_id": t1.parked_turn})
    assert done.status_code == 200, done.text
    await _worker_runs(console, t1.parked)
    [turn] = await console.bot.turns(t1.parked)
    assert turn.status == TurnStatus.CANCELLED
    assert (await ana.get("/console/api/waiting")).json()["items"] == []


async def _worker_runs(served: Console, key: str) -> None:
    """A worker (another process's runtime on the database) takes the session up, as `bot
    worker` would, and ends what was asked to stop."""
    store = await SqlStore.open(served.db_url)
    worker = Runtime(store, ScriptedModel(), agent=AGENT, poll_interval=0.02)
    try:
        worker.kick(key)

        async def ended() -> bool:
            return all(t.status.finished for t in await served.bot.turns(key))

        await eventually(ended, within=30)
    finally:
        await worker.close()
        await store.close()


async def _frames(lines: Any, until_seq: int, seen: list[dict[str, Any]]) -> None:
    frame: dict[str, Any] = {}
    async for line in lines:
        if line.startswith("id: "):
            frame["id"] = int(line[4:])
        elif line.startswith("event: "):
            frame["event"] = line[7:]
        elif line.startswith("data: "):
            frame["data"] = json.loads(line[6:])
        elif line == "" and frame:
            seen.append(frame)
            if frame.get("id", 0) >= until_seq:
                return
            frame = {}


async def test_events_catch_up_then_follow_live(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    ana = await console.login("ana")
    url = "/console/api/sessions/" + quote(t1.done, safe="") + "/events"
    seen: list[dict[str, Any]] = []
    async with ana.client.stream("GET", url, headers={"Last-Event-ID": "4"}) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        lines = answer.aiter_lines()
        async with asyncio.timeout(30):
            await _frames(lines, 6, seen)
        assert [f["id"] for f in seen] == [5, 6]  # only what followed seq 4
        assert [f["event"] for f in seen] == ["message.completed", "turn.completed"]
        assert seen[0]["data"]["summary"] == "Order o-1 has shipped."
        assert seen[0]["data"]["turn_id"] == t1.done_turn
        # Another process runs a turn in the session: its events reach the stream live.
        store = await SqlStore.open(console.db_url)
        other = Runtime(store, ScriptedModel([ScriptedReply(text="Still shipped.")]), agent=AGENT)
        try:
            await other.session(AGENT, t1.done).turn(
                said("T1", "C1DONE", "1700001000.000100", t1.speaker, "and now?"),
                turn_id="t1-done-again",
            )
        finally:
            await other.close()
            await store.close()
        async with asyncio.timeout(30):
            await _frames(lines, 9, seen)
    live = seen[2:]
    assert [f["id"] for f in live] == [7, 8, 9]
    assert [f["event"] for f in live] == ["turn.started", "message.completed", "turn.completed"]
    assert live[1]["data"]["summary"] == "Still shipped."


async def test_events_from_the_start_and_bad_cursors(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    ana = await console.login("ana")
    url = "/console/api/sessions/" + quote(t1.done, safe="") + "/events"
    seen: list[dict[str, Any]] = []
    async with ana.client.stream("GET", url + "?after=0") as answer:
        async with asyncio.timeout(30):
            await _frames(answer.aiter_lines(), 6, seen)
    assert [f["id"] for f in seen] == [1, 2, 3, 4, 5, 6]
    bad = await ana.get(url, headers={"Last-Event-ID": "x"})
    assert bad.status_code == 400


async def test_a_stop_ends_open_streams(console: Console) -> None:  # noqa: F811
    """Closing the console (what a stop signal does) ends its streams with `closing`."""
    t1 = console.seeded.t1
    ana = await console.login("ana")
    url = "/console/api/sessions/" + quote(t1.done, safe="") + "/events"
    seen: list[dict[str, Any]] = []
    async with ana.client.stream("GET", url + "?after=6") as answer:
        service = console.bot.bot.console
        assert service is not None
        lines = answer.aiter_lines()
        await eventually(lambda: True)
        service.close()
        async with asyncio.timeout(30):
            async for line in lines:
                if line.startswith("event: "):
                    seen.append({"event": line[7:]})
    assert seen[-1] == {"event": "closing"}
