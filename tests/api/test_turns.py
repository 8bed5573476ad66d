"""Turns over HTTP: a JSON answer when the turn ends, idempotency by turn id, the durable log
read back, polling a turn that is still running, and bad input that is a 4xx and stores
nothing."""

from __future__ import annotations

import asyncio

import pytest

from agent import ScriptedModel
from tests.api.agents import AGENT
from tests.bot.agents import GATE, GATED, SIMPLE
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")


async def test_a_turn_answers_json_when_it_ends_and_its_events_are_in_the_log(
    db_url, api, clients
) -> None:
    model = ScriptedModel(SIMPLE)
    bot = await api(db_url, AGENT, model)
    alice = clients(bot, "alice")

    answer = await alice.post("/sessions/support-1/turns", json={"text": "hi", "turn_id": "t1"})

    assert answer.status_code == 200
    body = answer.json()
    assert (body["status"], body["text"], body["turn_id"]) == (
        "completed",
        "Hello from the agent.",
        "t1",
    )
    assert body["session"] == "support-1"
    assert body["replayed"] is False
    polled = await alice.get(body["poll"])
    assert polled.json()["status"] == "completed"
    log = (await alice.get("/sessions/support-1/events")).json()
    types = [e["type"] for e in log["events"]]
    assert types[0] == "turn.started"
    assert types[-1] == "turn.completed"
    seqs = [e["seq"] for e in log["events"]]
    assert seqs == sorted(seqs)
    assert len(set(seqs)) == len(seqs)
    assert log["last_seq"] == seqs[-1]
    assert all(e["live"] is False and e["session"] == "support-1" for e in log["events"])
    later = (await alice.get(f"/sessions/support-1/events?after={seqs[1]}")).json()
    assert [e["seq"] for e in later["events"]] == seqs[2:]
    # The speaker is the token's principal, attested: the engine's own record says so.
    turn = await bot.bot.runtime.store.get_turn("api:T0DEMO:support-1", "t1")
    assert turn.input.inbound.user.id == "U0ALICE"
    assert turn.input.inbound.user.attested
    assert turn.input.inbound.source == "api"


async def test_the_same_turn_id_is_the_same_turn_and_runs_once(db_url, api, clients) -> None:
    model = ScriptedModel(SIMPLE)
    bot = await api(db_url, AGENT, model)
    alice = clients(bot, "alice")
    first = await alice.post(
        "/sessions/s/turns", json={"text": "hi"}, headers={"Idempotency-Key": "k-1"}
    )
    again = await alice.post(
        "/sessions/s/turns", json={"text": "hi"}, headers={"Idempotency-Key": "k-1"}
    )
    by_body = await alice.post("/sessions/s/turns", json={"text": "hi", "turn_id": "k-1"})

    assert first.status_code == again.status_code == by_body.status_code == 200
    assert first.json()["turn_id"] == again.json()["turn_id"] == "k-1"
    assert again.json()["text"] == first.json()["text"]
    assert again.json()["replayed"] is True
    assert len(model.requests) == 1, "a re-delivered turn id must not call the model again"
    other_text = await alice.post("/sessions/s/turns", json={"text": "bye", "turn_id": "k-1"})
    assert other_text.status_code == 409
    bob = clients(bot, "bob")
    other_speaker = await bob.post("/sessions/s/turns", json={"text": "hi", "turn_id": "k-1"})
    assert other_speaker.status_code == 409
    differ = await alice.post(
        "/sessions/s/turns", json={"text": "hi", "turn_id": "a"}, headers={"Idempotency-Key": "b"}
    )
    assert differ.status_code == 422
    assert len(model.requests) == 1
    assert len(await bot.turns("api:T0DEMO:s")) == 1


async def test_a_turn_still_running_after_the_wait_is_a_202_to_poll(db_url, api, clients) -> None:
    GATE.pop("slow", None)
    bot = await api(db_url, AGENT, ScriptedModel(GATED))
    alice = clients(bot, "alice")

    answer = await alice.post("/sessions/slow/turns?wait=0.2", json={"text": "go", "turn_id": "t"})

    assert answer.status_code == 202
    assert answer.headers["location"] == "/sessions/slow/turns/t"
    assert answer.json()["status"] in ("queued", "running")
    GATE.setdefault("slow", asyncio.Event()).set()

    async def finished() -> bool:
        return (await alice.get("/sessions/slow/turns/t")).json()["status"] == "completed"

    await eventually(finished, within=30)


async def test_a_speaker_other_than_the_token_is_refused(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE))
    alice = clients(bot, "alice")
    answer = await alice.post("/sessions/s/turns", json={"text": "hi", "speaker": "U0BOB"})
    assert answer.status_code == 403
    same = await alice.post("/sessions/s/turns", json={"text": "hi", "speaker": "U0ALICE"})
    assert same.status_code == 200
    assert len(await bot.turns("api:T0DEMO:s")) == 1
