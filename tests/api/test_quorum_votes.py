"""Over HTTP, a request that needs two approvals takes each answer as a vote: the reply's
`votes` says where it stands, GET pending shows the votes and no longer offers the request to
who voted, a repeat changes nothing, and the turn goes on only at the second approval. The
same contract (`tests/api/openapi`) checks every reply."""

from __future__ import annotations

from typing import Any

import pytest

from agent import Agent, Quorum, ScriptedModel, ScriptedReply, ToolCall, ToolContext, tool
from tests.api.conftest import ALICE, BOB, BOSS
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")
PAID: list[str] = []


@tool
async def wire_money(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Wire money once two of three approve."""
    approved = await ctx.request_input(
        id="approve",
        prompt=f"Wire for order {order_id}?",
        answerers=Quorum(2, users=[ALICE, BOB, BOSS]),
    )
    if approved is True:
        PAID.append(order_id)
    return {"paid": approved is True}


AGENT = Agent(name="api-quorum", instructions="x", tools=[wire_money])


def _model() -> ScriptedModel:
    call = ToolCall(id="c1", name="wire_money", input={"order_id": "42"})
    return ScriptedModel([ScriptedReply(tool_calls=[call]), ScriptedReply(text="Wired.")])


async def test_two_votes_over_http(db_url, api, clients) -> None:
    PAID.clear()
    bot = await api(db_url, AGENT, _model())
    alice, bob, eve = clients(bot, "alice"), clients(bot, "bob"), clients(bot, "eve")
    started = await alice.post("/sessions/wire/turns", json={"text": "wire", "turn_id": "t1"})
    assert started.json()["status"] == "suspended"
    [item] = (await alice.get("/sessions/wire/pending")).json()["inputs"]
    assert item["answerers"] == {"quorum": 2, "users": [ALICE, BOB, BOSS]}
    assert item["votes"] == {
        "need": 2,
        "approved_by": [],
        "denied_by": [],
        "outcome": None,
        "counted": True,
    }
    body = {"turn_id": "t1", "input_id": item["input_id"], "digest": item["digest"], "value": True}

    first = await alice.post("/sessions/wire/resume", json=body)
    assert first.status_code == 202
    assert first.json()["votes"]["approved_by"] == [ALICE]
    assert first.json()["votes"]["outcome"] is None
    again = await alice.post("/sessions/wire/resume", json={**body, "value": False})
    assert again.status_code == 202
    assert again.json()["votes"]["counted"] is False
    assert again.json()["votes"]["denied_by"] == []
    [mine] = (await alice.get("/sessions/wire/pending")).json()["inputs"]
    assert mine["may_answer"] is False, "offered again to who voted"
    assert mine["votes"]["approved_by"] == [ALICE]
    [bobs] = (await bob.get("/sessions/wire/pending")).json()["inputs"]
    assert bobs["may_answer"] is True
    assert (await eve.post("/sessions/wire/resume", json=body)).status_code == 404  # another tenant
    assert (await alice.get("/sessions/wire/turns/t1")).json()["status"] == "suspended"
    assert PAID == []

    last = await bob.post("/sessions/wire/resume", json=body)
    assert last.status_code == 202
    assert last.json()["votes"]["outcome"] == "approved"

    async def completed() -> bool:
        return (await alice.get("/sessions/wire/turns/t1")).json()["status"] == "completed"

    await eventually(completed, within=30)
    assert PAID == ["42"]
    late = await alice.post("/sessions/wire/resume", json=body)
    assert late.status_code == 409
