"""Answers over HTTP go through the engine's own checks, as a Slack click does: only the
person asked may answer (403), an answer must fit the request (422) and the request as it is
now (409), a broken authorization hook applies nothing (500), and of many racing answers
exactly one is applied."""

from __future__ import annotations

import asyncio

import pytest

from agent import ScriptedModel, TurnStatus
from tests.api.agents import AGENT, BROKEN_HOOK, PAY, REFUNDS
from tests.bot.agents import HOLDS, POLICY, hold_model
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")
KEY = "api:T0DEMO:refunds"


async def _parked(alice, path: str = "/sessions/refunds/turns") -> dict:
    answer = await alice.post(path, json={"text": "refund order 42", "turn_id": "t1"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "suspended"
    return body["request"]


async def _status(client, turn_id: str = "t1", key: str = "refunds") -> str:
    return (await client.get(f"/sessions/{key}/turns/{turn_id}")).json()["status"]


async def test_the_requester_answers_others_cannot_and_bad_answers_change_nothing(
    db_url, api, clients
) -> None:
    REFUNDS.clear()
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    request = await _parked(alice)
    answer = {"turn_id": "t1", "input_id": "approve", "digest": request["digest"]}

    pending = (await alice.get("/sessions/refunds/pending")).json()
    assert pending["input"]["input_id"] == "approve"
    assert pending["input"]["may_answer"] is True
    assert (await bob.get("/sessions/refunds/pending")).json()["input"]["may_answer"] is False

    assert (
        await bob.post("/sessions/refunds/resume", json={**answer, "value": True})
    ).status_code == 403
    misfit = await alice.post("/sessions/refunds/resume", json={**answer, "value": "yes"})
    assert misfit.status_code == 422
    stale = await alice.post(
        "/sessions/refunds/resume", json={**answer, "value": True, "digest": "0" * 64}
    )
    assert stale.status_code == 409
    wrong_input = await alice.post(
        "/sessions/refunds/resume", json={**answer, "value": True, "input_id": "other"}
    )
    assert wrong_input.status_code == 409
    missing = await alice.post("/sessions/refunds/resume", json={"turn_id": "t1", "value": True})
    assert missing.status_code == 422
    assert await _status(alice) == "suspended"
    assert REFUNDS == []

    applied = await alice.post("/sessions/refunds/resume", json={**answer, "value": True})
    assert applied.status_code == 202
    assert applied.headers["location"] == "/sessions/refunds/turns/t1"

    async def completed() -> bool:
        return await _status(alice) == "completed"

    await eventually(completed, within=30)
    assert len(REFUNDS) == 1
    again = await alice.post("/sessions/refunds/resume", json={**answer, "value": True})
    assert again.status_code == 409
    log = (await alice.get("/sessions/refunds/events")).json()["events"]
    resolved = [e for e in log if e["type"] == "input.resolved"]
    assert [(e["outcome"], e["by"]) for e in resolved] == [("answered", "U0ALICE")]


async def test_racing_resumes_apply_exactly_one(db_url, api, clients) -> None:
    REFUNDS.clear()
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    request = await _parked(alice)
    body = {"turn_id": "t1", "input_id": "approve", "digest": request["digest"], "value": True}

    answers = await asyncio.gather(
        *(alice.post("/sessions/refunds/resume", json=body) for _ in range(8))
    )

    codes = sorted(a.status_code for a in answers)
    assert codes == [202] + [409] * 7, codes

    async def completed() -> bool:
        return await _status(alice) == "completed"

    await eventually(completed, within=30)
    assert len(REFUNDS) == 1, "the resumed tool's effect must happen once"
    steps = await bot.session(KEY).steps("t1")
    assert [s for s in steps if s.startswith("input:")] == ["input:t1:approve"]


async def test_a_policy_answer_is_granted_by_the_agents_hook(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(POLICY))
    alice, boss = clients(bot, "alice"), clients(bot, "boss")
    request = await _parked(alice)
    body = {"turn_id": "t1", "input_id": "manager-ok", "digest": request["digest"], "value": True}
    assert (await boss.get("/sessions/refunds/pending")).json()["input"]["may_answer"] is True
    assert (await alice.post("/sessions/refunds/resume", json=body)).status_code == 403
    assert (await boss.post("/sessions/refunds/resume", json=body)).status_code == 202

    async def completed() -> bool:
        return await _status(alice) == "completed"

    await eventually(completed, within=30)


async def test_a_failing_hook_is_a_500_and_applies_nothing(db_url, api, clients) -> None:
    bot = await api(db_url, BROKEN_HOOK, ScriptedModel(POLICY))
    alice, boss = clients(bot, "alice"), clients(bot, "boss")
    request = await _parked(alice)
    body = {"turn_id": "t1", "input_id": "manager-ok", "digest": request["digest"], "value": True}

    failed = await boss.post("/sessions/refunds/resume", json=body)

    assert failed.status_code == 500
    assert "nothing was applied" in failed.json()["error"]
    assert "approvals service" not in failed.text
    assert await _status(alice) == "suspended"
    [pending] = await bot.session(KEY).pending()
    assert pending.digest == request["digest"]
    log = (await alice.get("/sessions/refunds/events")).json()["events"]
    assert not [e for e in log if e["type"] == "input.resolved"]
    assert (await alice.get("/sessions/refunds/pending")).status_code == 500


async def test_a_proposed_write_is_confirmed_once_by_the_requester(db_url, api, clients) -> None:
    HOLDS.clear()
    bot = await api(db_url, AGENT, hold_model())
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    turn = await alice.post("/sessions/holds/turns", json={"text": "hold order 42"})
    assert turn.json()["status"] == "completed"
    [proposal] = (await alice.get("/sessions/holds/pending")).json()["confirmations"]
    assert proposal["tool"] == "place_hold"
    assert proposal["may_answer"] is True
    path = f"/sessions/holds/confirmations/{proposal['confirmation_id']}"

    assert (await bob.post(path, json={"accepted": True})).status_code == 403
    assert (await alice.post(path, json={"accepted": "yes"})).status_code == 422
    assert (
        await alice.post("/sessions/holds/confirmations/nope", json={"accepted": True})
    ).status_code == 409
    confirmed = await alice.post(path, json={"accepted": True})
    assert confirmed.status_code == 202
    follow_up = confirmed.json()["turn_id"]

    async def completed() -> bool:
        return await _status(alice, follow_up, "holds") == "completed"

    await eventually(completed, within=30)
    assert len(HOLDS) == 1
    assert (await alice.post(path, json={"accepted": True})).status_code == 409
    assert (await alice.get("/sessions/holds/pending")).json()["confirmations"] == []


async def test_another_tenant_never_reaches_the_session(db_url, api, clients) -> None:
    """Eve has alice's user id in another workspace: another person, another tenant."""
    REFUNDS.clear()
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice, eve = clients(bot, "alice"), clients(bot, "eve")
    request = await _parked(alice)
    answer = {"turn_id": "t1", "input_id": "approve", "digest": request["digest"], "value": True}
    before = (await alice.get("/sessions/refunds/events")).json()

    # Her own session of that name, which has no events: alice's are never read.
    assert (await eve.get("/sessions/refunds/events")).json() == {"events": [], "last_seq": 0}
    assert (await eve.get("/sessions/refunds/pending")).status_code == 404
    assert (await eve.get("/sessions/refunds/turns/t1")).status_code == 404
    assert (await eve.post("/sessions/refunds/resume", json=answer)).status_code == 404
    assert (await eve.post("/sessions/refunds/cancel", json={})).status_code == 404
    assert (await eve.post("/sessions/refunds/reset")).status_code == 404
    assert (
        await eve.post("/sessions/refunds/confirmations/x", json={"accepted": True})
    ).status_code == 404

    assert (await alice.get("/sessions/refunds/events")).json() == before
    assert await _status(alice) == "suspended"
    assert REFUNDS == []
    # Eve's own session of that name is hers alone.
    assert (await eve.post("/sessions/refunds/turns", json={"text": "hi"})).status_code == 200
    assert len(await bot.turns("api:T0OTHER:refunds")) == 1
    assert (await alice.get("/sessions/refunds/events")).json() == before
    # The engine's own fence, below the API's: an answer from the other workspace is refused.
    from agent import ResumeAuthorizationError

    with pytest.raises(ResumeAuthorizationError):
        await bot.session(KEY).resume(
            "t1",
            "approve",
            True,
            principal={"team": "T0OTHER", "enterprise": None, "user": "U0ALICE"},
            digest=request["digest"],
        )


async def test_cancel_ends_a_parked_turn_and_reset_archives(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    await _parked(alice)

    assert (
        await alice.post("/sessions/refunds/cancel", json={"turn_id": "nope"})
    ).status_code == 404
    cancelled = await alice.post("/sessions/refunds/cancel", json={"turn_id": "t1"})
    assert cancelled.status_code == 200
    assert cancelled.json()["cancelled"] == ["t1"]

    async def ended() -> bool:
        return await _status(alice) == "cancelled"

    await eventually(ended, within=30)
    assert (await alice.post("/sessions/refunds/cancel", json={"turn_id": "t1"})).status_code == 409
    assert (await alice.get("/sessions/refunds/pending")).json()["input"] is None
    log = (await alice.get("/sessions/refunds/events")).json()["events"]
    assert [e["by"] for e in log if e["type"] == "turn.cancelled"] == ["U0ALICE"]

    reset = await alice.post("/sessions/refunds/reset")
    assert reset.status_code == 200
    assert reset.json() == {
        "session": "refunds",
        "status": "applied",
        "archived_generation": 0,
        "generation": 1,
    }
    assert (await alice.get("/sessions/refunds/events")).json()["events"] == []
    # The turn itself stays readable (its id names it for good); its history is archived.
    assert (await alice.get("/sessions/refunds/turns/t1")).json()["status"] == "cancelled"
    again = await alice.post(
        "/sessions/refunds/turns", json={"text": "refund order 42", "turn_id": "t2"}
    )
    assert again.json()["status"] == "suspended"


async def test_cancel_stops_a_running_turn(db_url, api, clients) -> None:
    from tests.bot.agents import GATE, LONG

    GATE.pop("long", None)
    bot = await api(db_url, AGENT, ScriptedModel(LONG))
    alice = clients(bot, "alice")
    started = await alice.post("/sessions/long/turns?wait=0", json={"text": "go", "turn_id": "t"})
    assert started.status_code == 202

    async def in_the_tool() -> bool:
        log = (await alice.get("/sessions/long/events")).json()["events"]
        return any(e["type"] == "action.requested" for e in log)

    await eventually(in_the_tool, within=30)
    cancelled = await alice.post("/sessions/long/cancel", json={"turn_id": "t", "reason": "enough"})
    assert cancelled.status_code == 200
    assert cancelled.json()["cancelled"] == ["t"]

    async def ended() -> bool:
        return await _status(alice, "t", "long") == "cancelled"

    await eventually(ended, within=30)
    turn = await bot.bot.runtime.store.get_turn("api:T0DEMO:long", "t")
    assert turn.status == TurnStatus.CANCELLED
    assert turn.cancel_reason == "enough"
    assert (await alice.post("/sessions/long/cancel", json={})).json()["cancelled"] == []


async def test_a_new_turn_while_parked_is_a_409(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")
    await _parked(alice)
    blocked = await alice.post("/sessions/refunds/turns", json={"text": "and another thing"})
    assert blocked.status_code == 409
    assert len(await bot.turns(KEY)) == 1
