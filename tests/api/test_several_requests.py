"""Over HTTP, a turn whose calls each asked waits on every request at once: GET pending lists
them all (`inputs`, in call order), each is answered on its own, and the turn goes on only once
none still waits; each call pays exactly once."""

from __future__ import annotations

import pytest

from agent import ScriptedModel, ScriptedReply, ToolCall
from tests.api.agents import AGENT, REFUNDS
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")
ORDERS = ("41", "42", "43")


def _three_refunds() -> ScriptedModel:
    calls = [ToolCall(id=f"c{o}", name="pay_refund", input={"order_id": o}) for o in ORDERS]
    return ScriptedModel(
        [ScriptedReply(text="Refunding.", tool_calls=calls), ScriptedReply(text="Settled.")]
    )


async def test_every_waiting_request_is_listed_and_answered_on_its_own(
    db_url, api, clients
) -> None:
    REFUNDS.clear()
    bot = await api(db_url, AGENT, _three_refunds())
    alice, bob = clients(bot, "alice"), clients(bot, "bob")
    started = await alice.post("/sessions/refunds/turns", json={"text": "refund", "turn_id": "t1"})
    assert started.json()["status"] == "suspended"
    assert [r["call_id"] for r in started.json()["requests"]] == ["c41", "c42", "c43"]

    pending = (await alice.get("/sessions/refunds/pending")).json()
    inputs = pending["inputs"]
    assert [i["prompt"] for i in inputs] == [f"Refund order {o}?" for o in ORDERS]
    assert len({i["input_id"] for i in inputs}) == 3
    assert pending["input"] == inputs[0]
    assert all(i["may_answer"] for i in inputs)
    assert not any(
        i["may_answer"] for i in (await bob.get("/sessions/refunds/pending")).json()["inputs"]
    )

    async def answer(item: dict, value: bool) -> int:
        body = {"turn_id": "t1", "input_id": item["input_id"], "digest": item["digest"]}
        return (
            await alice.post("/sessions/refunds/resume", json={**body, "value": value})
        ).status_code

    assert await answer(inputs[2], True) == 202
    assert await answer(inputs[2], True) == 409, "a second answer to one request"
    assert await answer(inputs[1], False) == 202
    turn = (await alice.get("/sessions/refunds/turns/t1")).json()
    assert turn["status"] == "suspended"
    left = (await alice.get("/sessions/refunds/pending")).json()["inputs"]
    assert [i["input_id"] for i in left] == [inputs[0]["input_id"]]
    assert REFUNDS == [], "a call ran on before the turn resumed"

    assert await answer(inputs[0], True) == 202

    async def completed() -> bool:
        return (await alice.get("/sessions/refunds/turns/t1")).json()["status"] == "completed"

    await eventually(completed, within=30)
    assert sorted(r.rsplit(":", 1)[1] for r in REFUNDS) == ["41", "43"]
    assert (await alice.get("/sessions/refunds/pending")).json()["inputs"] == []
