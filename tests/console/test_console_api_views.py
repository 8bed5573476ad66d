"""What the console shows, over real HTTP on both databases, from a database filled by real
turns (`tests.console.seed`): each view's shape and content, search and paging, the timeline
of a session with scrubbed arguments and results, and tenancy: an operator of one workspace
never sees, nor learns of, another's sessions."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from tests.api.conftest import (  # noqa: F401  (fixtures)
    _loop_never_blocked,
    bots,
    db_url,
    launch,
    picked_db_url,
    standin,
)
from tests.console.console_fixtures import Console, console  # noqa: F401
from tests.console.seed import SECRET

SESSION_FIELDS = {
    "key",
    "status",
    "team",
    "channel",
    "thread_ts",
    "updated_at",
    "turns",
    "last_turn_id",
    "last_speaker",
    "slack_url",
}


def path(key: str) -> str:
    return "/console/api/sessions/" + quote(key, safe="")


async def _sessions(op: Any, **params: Any) -> dict[str, Any]:
    answer = await op.get("/console/api/sessions", params=params)
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


async def test_sessions_are_listed_by_workspace(console: Console) -> None:  # noqa: F811
    seeded = console.seeded
    root, ana, bob = [await console.login(who) for who in ("root", "ana", "bob")]
    everything = await _sessions(root)
    assert {s["key"] for s in everything["sessions"]} == {
        *seeded.t1.sessions,
        *seeded.t2.sessions,
    }
    assert everything["next"] is None
    assert {s["key"] for s in (await _sessions(ana))["sessions"]} == set(seeded.t1.sessions)
    assert {s["key"] for s in (await _sessions(bob))["sessions"]} == set(seeded.t2.sessions)
    [done] = [s for s in everything["sessions"] if s["key"] == seeded.t1.done]
    assert set(done) >= SESSION_FIELDS
    assert done["status"] == "idle"
    assert (done["team"], done["channel"], done["thread_ts"]) == (
        "T1",
        "C1DONE",
        "1700001000.000100",
    )
    assert (done["turns"], done["last_turn_id"]) == (1, seeded.t1.done_turn)
    assert done["last_speaker"] == f"T1:{seeded.t1.speaker}"
    assert done["slack_url"] == "https://slack.com/app_redirect?team=T1&channel=C1DONE"
    parked = await _sessions(root, status="suspended")
    assert {s["key"] for s in parked["sessions"]} == {seeded.t1.parked, seeded.t2.parked}


async def test_search_and_paging(console: Console) -> None:  # noqa: F811
    seeded = console.seeded
    root = await console.login("root")
    by_channel = await _sessions(root, q="C1PARK")
    assert [s["key"] for s in by_channel["sessions"]] == [seeded.t1.parked]
    by_turn = await _sessions(root, q=seeded.t2.failed_turn)
    assert [s["key"] for s in by_turn["sessions"]] == [seeded.t2.failed]
    by_speaker = await _sessions(root, q=seeded.t2.speaker)
    assert {s["key"] for s in by_speaker["sessions"]} == set(seeded.t2.sessions)
    assert (await _sessions(root, q="100%_nothing"))["sessions"] == []
    ana = await console.login("ana")
    assert (await _sessions(ana, q=seeded.t2.speaker))["sessions"] == []  # T2 stays hidden
    seen: list[str] = []
    before = None
    for _ in range(10):
        page = await _sessions(root, limit=3, **({"before": before} if before else {}))
        assert len(page["sessions"]) <= 3
        seen += [s["key"] for s in page["sessions"]]
        before = page["next"]
        if before is None:
            break
    assert sorted(seen) == sorted([*seeded.t1.sessions, *seeded.t2.sessions])
    assert len(seen) == len(set(seen))
    bad = await root.get("/console/api/sessions", params={"before": "not-a-cursor"})
    assert bad.status_code == 400
    assert (await root.get("/console/api/sessions", params={"limit": "0"})).status_code == 400


async def test_a_session_timeline(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    ana = await console.login("ana")
    answer = await ana.get(path(t1.done))
    assert answer.status_code == 200, answer.text
    assert SECRET not in answer.text  # scrubbed from arguments, results and summaries
    detail = answer.json()
    assert detail["session"]["key"] == t1.done
    [turn] = detail["turns"]
    assert (turn["turn_id"], turn["status"], turn["kind"]) == (t1.done_turn, "completed", "turn")
    assert turn["speaker"] == f"T1:{t1.speaker}"
    assert turn["finished_at"] >= turn["created_at"]
    kinds = [(s["kind"], s["name"]) for s in turn["steps"]]
    assert kinds == [("model", "model"), ("tool", "lookup_order"), ("model", "model")]
    first, tool_step, last = turn["steps"]
    assert first["tokens"] == {"input": 120, "output": 30, "cache_read": 0, "cache_write": 0}
    assert first["stop_reason"] == "tool_use"
    assert first["text"] == "Looking it up."
    assert last["text"] == "Order o-1 has shipped."
    assert tool_step["arguments"] == {"order": "o-1", "api_key": "[redacted]"}
    assert tool_step["result"]["status"] == "shipped"
    assert tool_step["result"]["echo"] == "used [redacted]"
    assert tool_step["result_truncated"] is False
    for step in turn["steps"]:
        assert step["at"] >= turn["created_at"]
        assert step["duration_ms"] >= 0
    types = [e["type"] for e in turn["events"]]
    assert types[0] == "turn.started"
    assert types[-1] == "turn.completed"
    assert "action.requested" in types
    seqs = [e["seq"] for e in turn["events"]]
    assert seqs == sorted(seqs)
    assert all(e["at"] is not None and e["summary"] for e in turn["events"])
    assert detail["receipts"] == []
    assert detail["waiting"] == []


async def test_the_timeline_of_a_write_and_of_a_park(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    root = await console.login("root")
    paying = (await root.get(path(t1.paying))).json()
    assert [t["turn_id"] for t in paying["turns"]] == [t1.paying_turn_ids[0], t1.paying_turn_ids[1]]
    confirmed = paying["turns"][1]
    [charge] = [s for s in confirmed["steps"] if s["kind"] == "tool"]
    assert charge["name"] == "charge"
    assert "EffectUncertainError" in charge["error"]
    [receipt] = paying["receipts"]
    assert (receipt["key"], receipt["status"], receipt["tool"]) == (
        t1.receipt_key,
        "uncertain",
        "charge",
    )
    parked = (await root.get(path(t1.parked))).json()
    [turn] = parked["turns"]
    assert turn["status"] == "suspended"
    assert [s["kind"] for s in turn["steps"]] == ["model", "input"]
    assert turn["steps"][1]["name"] == "refund_order"
    [waiting] = parked["waiting"]
    assert (waiting["turn_id"], waiting["kind"], waiting["tool"]) == (
        t1.parked_turn,
        "input",
        "refund_order",
    )


async def test_another_workspace_is_not_found(console: Console) -> None:  # noqa: F811
    t1 = console.seeded.t1
    bob = await console.login("bob")
    for key in t1.sessions:
        hidden = await bob.get(path(key))
        assert hidden.status_code == 404, key
        assert hidden.json() == {"error": "no such session"}
        events = await bob.get(path(key) + "/events")
        assert events.status_code == 404
    missing = await bob.get(path("slack:T2:C0NONE:1.000"))
    assert (missing.status_code, missing.json()) == (404, {"error": "no such session"})


async def test_waiting_receipts_and_stuck(console: Console) -> None:  # noqa: F811
    seeded = console.seeded
    root, ana = await console.login("root"), await console.login("ana")
    items = (await root.get("/console/api/waiting")).json()["items"]
    assert {i["session"] for i in items} == {seeded.t1.parked, seeded.t2.parked}
    [mine] = (await ana.get("/console/api/waiting")).json()["items"]
    assert mine["session"] == seeded.t1.parked
    assert mine["summary"] == "Refund order o-2?"
    assert mine["answerers"] == f"user {seeded.t1.speaker}"
    assert mine["age_s"] >= 0
    assert mine["since"] > 0
    assert mine["slack_url"].startswith("https://slack.com/app_redirect?team=T1")

    receipts = (await root.get("/console/api/receipts?status=uncertain")).json()["receipts"]
    assert {(r["session"], r["key"]) for r in receipts} == {
        (seeded.t1.paying, "charge:o-3"),
        (seeded.t2.paying, "charge:o-3"),
    }
    [r1] = (await ana.get("/console/api/receipts?status=uncertain")).json()["receipts"]
    assert r1["session"] == seeded.t1.paying
    assert r1["status"] == "uncertain"
    assert r1["fingerprint"]
    bad = await ana.get("/console/api/receipts?status=maybe")
    assert bad.status_code == 400

    stuck = (await root.get("/console/api/stuck?older_than=0")).json()["turns"]
    assert {(t["session"], t["turn_id"]) for t in stuck} == {
        (seeded.t1.stuck, seeded.t1.stuck_turn),
        (seeded.t2.stuck, seeded.t2.stuck_turn),
    }
    [mine_stuck] = (await ana.get("/console/api/stuck?older_than=0")).json()["turns"]
    assert mine_stuck["status"] == "queued"
    assert mine_stuck["age_s"] >= 0
    assert mine_stuck["lease_owner"] is None
    assert mine_stuck["reasons"][0]["code"] == "queued"
    assert (await ana.get("/console/api/stuck?older_than=86400")).json()["turns"] == []


async def test_daily_chart(console: Console) -> None:  # noqa: F811
    root, bob = await console.login("root"), await console.login("bob")
    days = (await root.get("/console/api/daily?days=3")).json()["days"]
    assert len(days) == 3
    assert days == sorted(days, key=lambda d: d["day"])
    assert [d["turns"] for d in days[:2]] == [0, 0]
    today = days[-1]
    # Per workspace: done, park, pay (and its confirmed follow-up), fail, stuck.
    assert today["turns"] == 12
    assert today["failed"] == 2
    assert today["input_tokens"] >= 2 * 320
    assert today["output_tokens"] >= 2 * 42
    [bobs] = (await bob.get("/console/api/daily?days=1")).json()["days"]
    assert (bobs["turns"], bobs["failed"]) == (6, 1)
    assert (await root.get("/console/api/daily?days=0")).status_code == 400
