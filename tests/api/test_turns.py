"""Turns over HTTP: a JSON answer when the turn ends, idempotency by turn id, the durable log
read back, polling a turn that is still running, and bad input that is a 4xx and stores
nothing."""

from __future__ import annotations

import asyncio
import json

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


BAD_BODIES = [
    (b"{not json", 400),
    (b"\xff\xfe", 400),
    (b"", 400),
    (b'{"text": NaN}', 400),
    (b"[" * 100_000 + b"]" * 100_000, 400),
    (b'["a list"]', 422),
    (b"{}", 422),
    (b'{"text": 42}', 422),
    (b'{"text": ""}', 422),
    (b'{"text": "hi", "extra": 1}', 422),
    (b'{"text": "hi", "turn_id": "has:colon"}', 422),
    (b'{"text": "hi", "turn_id": "' + b"x" * 129 + b'"}', 422),
    (b'{"text": "hi", "replace": "yes"}', 422),
]


@pytest.mark.parametrize(("raw", "status"), BAD_BODIES)
async def test_a_malformed_body_is_a_4xx_and_starts_nothing(
    db_url, api, clients, raw: bytes, status: int
) -> None:
    model = ScriptedModel(SIMPLE)
    bot = await api(db_url, AGENT, model)
    alice = clients(bot, "alice")
    answer = await alice.post(
        "/sessions/s/turns", content=raw, headers={"Content-Type": "application/json"}
    )
    assert answer.status_code == status, answer.text
    assert "error" in answer.json()
    assert raw[:40].decode("utf-8", "replace") not in answer.text or len(raw) < 3
    assert await bot.turns("api:T0DEMO:s") == []
    assert model.requests == []


async def test_junk_in_the_path_query_and_headers_is_a_400(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE))
    alice = clients(bot, "alice")
    assert (await alice.post("/sessions/bad%20key/turns", json={"text": "hi"})).status_code == 400
    too_long = "k" * 129
    assert (await alice.post(f"/sessions/{too_long}/turns", json={"text": "hi"})).status_code == 400
    junk_id = await alice.post(
        "/sessions/s/turns", json={"text": "hi"}, headers={"Idempotency-Key": "a b"}
    )
    assert junk_id.status_code == 400
    assert (await alice.post("/sessions/s/turns?wait=soon", json={"text": "hi"})).status_code == 400
    assert (await alice.post("/sessions/s/turns?wait=-1", json={"text": "hi"})).status_code == 400
    await alice.post("/sessions/s/turns", json={"text": "hi"})
    for after in ("-1", "x", "1.5", "9" * 40):
        assert (await alice.get(f"/sessions/s/events?after={after}")).status_code == 400
    bad_header = await alice.get("/sessions/s/events", headers={"Last-Event-ID": "abc"})
    assert bad_header.status_code == 400
    assert (await alice.get("/sessions/s/events?limit=0")).status_code == 400


async def test_an_oversized_body_or_text_is_refused(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE), MAX_INBOUND_CHARS=100)
    alice = clients(bot, "alice")
    huge = await alice.post("/sessions/s/turns", content=b'{"text": "' + b"x" * 2_000_000 + b'"}')
    assert huge.status_code == 413
    long_text = await alice.post("/sessions/s/turns", json={"text": "x" * 101})
    assert long_text.status_code == 422
    assert await bot.turns("api:T0DEMO:s") == []


async def test_half_a_surrogate_pair_is_replaced_not_a_500(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE))
    alice = clients(bot, "alice")
    raw = json.dumps({"text": "hi \ud800 there"}).encode()
    answer = await alice.post("/sessions/s/turns", content=raw)
    assert answer.status_code == 200
    turns = await bot.turns("api:T0DEMO:s")
    assert turns[0].input.text == "hi \ufffd there"
