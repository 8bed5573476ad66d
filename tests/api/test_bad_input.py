"""Bad input over HTTP is a 4xx, never a 5xx, and stores nothing: bodies, paths, queries,
headers, sizes, and text no database takes."""

from __future__ import annotations

import json

from agent import ScriptedModel
from tests.api.agents import AGENT
from tests.bot.agents import SIMPLE

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


async def test_a_malformed_body_is_a_4xx_and_starts_nothing(db_url, api, clients) -> None:
    model = ScriptedModel(SIMPLE)
    bot = await api(db_url, AGENT, model)
    alice = clients(bot, "alice")
    for raw, status in BAD_BODIES:
        answer = await alice.post(
            "/sessions/s/turns", content=raw, headers={"Content-Type": "application/json"}
        )
        assert answer.status_code == status, (raw[:40], answer.text)
        assert "error" in answer.json()
        assert raw[:40].decode("utf-8", "replace") not in answer.text or len(raw) < 3
        for path in ("/sessions/s/resume", "/sessions/s/cancel"):
            # No session yet: 404 before the body is read; the body never makes it a 5xx.
            assert (await alice.post(path, content=raw)).status_code == 404
    assert await bot.turns("api:T0DEMO:s") == []
    assert model.requests == []
    await alice.post("/sessions/s/turns", json={"text": "hi"})
    for raw, _ in BAD_BODIES:
        if raw.strip():
            for path in ("/sessions/s/resume", "/sessions/s/confirmations/c"):
                assert (await alice.post(path, content=raw)).status_code in (400, 422), raw[:40]
    assert len(model.requests) == 1


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


async def test_a_wrong_method_or_an_unknown_path_answers_json(db_url, api) -> None:
    """Every refusal is the API's JSON shape, Starlette's routing ones included (no client
    with the contract hook: these routes and statuses are, rightly, not described)."""
    from tests.api.conftest import BY_USER, client

    bot = await api(db_url, AGENT, ScriptedModel(SIMPLE))
    headers = {"Authorization": f"Bearer {BY_USER['alice']}"}
    async with client(bot.server.url, headers=headers) as http:
        for method, path, allowed in [
            ("DELETE", "/sessions/s/turns", "POST"),
            ("GET", "/sessions/s/cancel", "POST"),
            ("POST", "/sessions/s/events", "GET"),
            ("PUT", "/openapi.json", "GET"),
            ("GET", "/slack/events", "POST"),
        ]:
            answer = await http.request(method, path)
            assert answer.status_code == 405, (method, path)
            assert answer.headers["content-type"].startswith("application/json")
            assert answer.json() == {"error": "method not allowed"}
            assert allowed in answer.headers["allow"]
        unknown = await http.get("/no/such/path")
        assert unknown.status_code == 404
        assert unknown.json() == {"error": "not found"}
