"""The offline scripted model (`bot.cli.offline_replies`) drives the example agent's real tools
through the engine: an order placed and looked up, a refund that asks the requester first and
proposes nothing when they say no (quoting why), one that proposes what is left when they say
yes, and an honest echo for anything else or another agent. (`tests/bot/test_offline_serve.py`
runs the same stories through a real `bot serve --offline`.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent import Agent, Runtime, ScriptedModel, TurnStatus, load_agent, tool
from bot.cli.offline_replies import ops_reply
from storage import SqlStore
from tests.support.hitl_fixtures import slack_event

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ops_agent"
SESSION = "slack:T1:C1:1700000000.000100"


def _agent(monkeypatch: pytest.MonkeyPatch, url: str) -> Agent:
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.delenv("OPS_REFUND_APPROVERS", raising=False)
    return load_agent(EXAMPLE, emitted_sources=["slack"])


async def test_a_refund_asks_first_and_a_no_proposes_nothing(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    agent = _agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with Runtime(store, ScriptedModel(responder=ops_reply), agent=agent) as rt:
            session = rt.session(agent, SESSION)
            placed = await session.turn(slack_event("order 3 blue mugs"), turn_id="T0")
            found = re.search(r"ord_[0-9a-f]{12}", placed.text)
            assert found is not None, placed.text
            order = found.group(0)
            looked = await session.turn(slack_event(f"look up {order}"), turn_id="T1")
            assert f"Order {order}: 3 x blue mug, paid $55.50, refunded $0.00" in looked.text

            turn = await session.start(
                slack_event(f"refund {order}, it arrived broken"), turn_id="T2"
            )
            assert (await session.result(turn)).status == TurnStatus.SUSPENDED
            [asked] = await session.pending()
            assert asked.prompt.startswith(f"Order {order}: blue mug x3, paid $55.50.")
            await session.resume(turn, asked.id, False, by="U1", reason="they send it back")
            answered = await session.result(turn)
            assert answered.status == TurnStatus.COMPLETED
            assert "no refund on" in answered.text
            assert "they send it back" in answered.text
            assert await store.list_confirmations(SESSION) == []

            damaged = slack_event(f"refund {order}, it is damaged")
            again = await session.start(damaged, turn_id="T3")
            assert (await session.result(again)).status == TurnStatus.SUSPENDED
            [asked] = await session.pending()
            await session.resume(again, asked.id, True, by="U1")
            assert "waits for approval" in (await session.result(again)).text
            [proposed] = await store.list_confirmations(SESSION)
            assert proposed.arguments == {"order_id": order, "amount": 55.5}
    finally:
        await store.close()


@tool
async def weather(city: str) -> str:
    """Another agent's tool."""
    return "sunny"


async def test_anything_else_or_another_agent_gets_an_honest_echo(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str
) -> None:
    ops = _agent(monkeypatch, sqlite_url)
    other = Agent(name="other", instructions="Weather.", tools=[weather])
    store = await SqlStore.open(sqlite_url)
    try:
        async with Runtime(store, ScriptedModel(responder=ops_reply), agent=ops) as rt:
            hello = await rt.session(ops, "s:1").turn(slack_event("hello there"))
            elsewhere = await rt.session(other, "s:2").turn(slack_event("order a mug"))
    finally:
        await store.close()
    assert "You wrote: “hello there”" in hello.text
    assert "I follow three scripts" in hello.text
    assert "only know the example agent's tools" in elsewhere.text
