"""Who may act, over HTTP, by the engine's rules for every surface: a token cancels only what
its principal may stop (403 JSON otherwise, and nothing stops), a confirmation binds to the
proposal's digest as a resume does, and refusals speak to a person (no internal session key;
a second answer is "already answered")."""

from __future__ import annotations

import pytest

from agent import ScriptedModel
from tests.api.agents import AGENT, PAY, REFUNDS
from tests.bot.agents import GATE, HOLDS, LONG, hold_model
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")


async def _status(client, turn_id: str, key: str) -> str:
    return (await client.get(f"/sessions/{key}/turns/{turn_id}")).json()["status"]


async def test_only_who_may_answer_a_parked_turn_or_asked_it_cancels_it(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    parked = await alice.post(
        "/sessions/refunds/turns", json={"text": "refund 42", "turn_id": "t1"}
    )
    assert parked.json()["status"] == "suspended"

    for body in ({}, {"turn_id": "t1"}):
        refused = await bob.post("/sessions/refunds/cancel", json=body)
        assert refused.status_code == 403
        assert refused.json()["error"].startswith("you can't stop this: it is waiting for an")
    assert await _status(alice, "t1", "refunds") == "suspended"
    assert (await alice.get("/sessions/refunds/pending")).json()["input"] is not None

    done = await alice.post("/sessions/refunds/cancel", json={"turn_id": "t1"})
    assert (done.status_code, done.json()["cancelled"]) == (200, ["t1"])


async def test_only_who_asked_cancels_a_running_turn(db_url, api, clients) -> None:
    GATE.pop("long", None)
    bot = await api(db_url, AGENT, ScriptedModel(LONG))
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    started = await alice.post("/sessions/long/turns?wait=0", json={"text": "go", "turn_id": "t"})
    assert started.status_code == 202

    async def in_the_tool() -> bool:
        log = (await alice.get("/sessions/long/events")).json()["events"]
        return any(e["type"] == "action.requested" for e in log)

    await eventually(in_the_tool, within=30)
    for body in ({}, {"turn_id": "t"}):
        refused = await bob.post("/sessions/long/cancel", json=body)
        assert refused.status_code == 403
        assert refused.json() == {
            "error": "you can't stop this: only the person who asked (or someone the agent's "
            "policy allows) can stop it"
        }
    assert await _status(alice, "t", "long") == "running"
    assert (await alice.post("/sessions/long/cancel", json={"turn_id": "t"})).status_code == 200

    async def ended() -> bool:
        return await _status(alice, "t", "long") == "cancelled"

    await eventually(ended, within=30)


async def test_a_confirmation_binds_to_its_digest(db_url, api, clients) -> None:
    HOLDS.clear()
    bot = await api(db_url, AGENT, hold_model())
    alice = clients(bot, "alice")
    await alice.post("/sessions/holds/turns", json={"text": "hold order 42"})
    [proposal] = (await alice.get("/sessions/holds/pending")).json()["confirmations"]
    path = f"/sessions/holds/confirmations/{proposal['confirmation_id']}"
    assert len(proposal["digest"]) == 64

    stale = await alice.post(path, json={"accepted": True, "digest": "0" * 64})
    assert stale.status_code == 409
    assert stale.json()["error"] == "the request changed since this answer was given for it"
    assert HOLDS == []
    confirmed = await alice.post(path, json={"accepted": True, "digest": proposal["digest"]})
    assert confirmed.status_code == 202

    again = await alice.post(path, json={"accepted": True, "digest": proposal["digest"]})
    assert (again.status_code, again.json()["error"]) == (409, "this request was already answered")


async def test_refusals_speak_to_a_person(db_url, api, clients) -> None:
    REFUNDS.clear()
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    request = (
        await alice.post("/sessions/s3/turns", json={"text": "refund 42", "turn_id": "t1"})
    ).json()["request"]
    answer = {"turn_id": "t1", "input_id": "approve", "digest": request["digest"], "value": True}

    not_yours = await bob.post("/sessions/s3/resume", json=answer)
    assert not_yours.json()["error"] == (
        "you can't answer this request: only the person it asks can answer it"
    )
    blocked = await alice.post("/sessions/s3/turns", json={"text": "and another thing"})
    assert blocked.status_code == 409
    assert "api:" not in blocked.text
    assert "T0DEMO" not in blocked.text
    assert "waiting for an answer" in blocked.json()["error"]

    assert (await alice.post("/sessions/s3/resume", json=answer)).status_code == 202
    again = await alice.post("/sessions/s3/resume", json=answer)
    assert (again.status_code, again.json()["error"]) == (409, "this request was already answered")
