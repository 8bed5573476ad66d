"""The gauges a scrape reads from the database, from rows the engine wrote, on SQLite and
PostgreSQL: queued turns, parked requests and sessions, uncertain receipts; the scrape's cache
and its answer while the database is gone."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    TurnStatus,
    tool,
)
from bot.core.metrics_gauges import StoreGaugeCollector
from storage import SqlStore
from storage.sql.gauges import store_gauges
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event


@tool(effect="write", confirmation="required")
async def wire(to: str) -> dict[str, str]:
    """Wire money."""
    raise AssertionError("never approved here")


def _proposing() -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c1", name="wire", input={"to": "bob"})]),
            ScriptedReply(text="asked"),
        ]
    )


def _uncertain_receipt(session: str) -> Any:
    """The row an effect whose outcome is unknown leaves (a timeout after the service may have
    applied it): written as the store writes it, since reaching it through the engine needs a
    service that loses a response (tests/integration/test_effects.py does that story)."""
    from storage.sql.schema import receipts

    def body(conn: Any) -> None:
        now = time.time()
        conn.execute(
            receipts.insert().values(
                session_key=session,
                key="reserve:FAN-7",
                receipt_id="r1",
                fingerprint="f",
                status="uncertain",
                turn_id="T1",
                step_id="s1",
                created_at=now,
                updated_at=now,
            )
        )

    return body


def _values(collector: StoreGaugeCollector) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return {s.name: s.value for f in registry.collect() for s in f.samples}


async def test_gauges_count_what_the_engine_left(sql_store: SqlStore) -> None:
    empty = await store_gauges(sql_store)
    assert (empty.queued_turns, empty.parked_requests, empty.parked_sessions) == (0, 0, 0)
    assert empty.uncertain_receipts == 0
    assert empty.age(empty.oldest_queued_at) == 0.0

    agent = Agent(name="ops", instructions="x", tools=[wire])
    async with Runtime(sql_store, _proposing(), agent=agent) as rt:
        await rt.session(agent, "proposer").turn(slack_event("wire bob"), turn_id="T1")
    parked_agent = refund_agent()
    async with Runtime(sql_store, refund_model(), agent=parked_agent) as rt:
        parked = rt.session(parked_agent, "parked")
        result = await parked.result(await parked.start(slack_event("refund 42")))
        assert result.status == TurnStatus.SUSPENDED
    queuing = Runtime(sql_store, ScriptedModel(), agent=agent, run_turns=False)
    async with queuing:
        for key in ("q1", "q2"):
            await queuing.session(agent, key).start(slack_event("hello"), turn_id=f"turn-{key}")
    await sql_store.run_sync(_uncertain_receipt("proposer"), write=True)

    gauges = await store_gauges(sql_store)
    assert gauges.queued_turns == 2
    assert gauges.parked_requests == 1
    assert gauges.parked_sessions == 1
    assert gauges.uncertain_receipts == 1
    queued = [t for key in ("q1", "q2") for t in await sql_store.list_turns(key)]
    assert gauges.oldest_queued_at == min(t.created_at for t in queued)
    [pending] = await sql_store.list_confirmations("proposer")
    assert gauges.oldest_parked_at == pending.created_at
    assert gauges.oldest_session_parked_at is not None
    assert gauges.age(gauges.oldest_queued_at) >= 0.0

    collector = StoreGaugeCollector(sql_store)
    await collector.refresh()
    values = _values(collector)
    assert values["bot_database_up"] == 1
    assert values["bot_queued_turns"] == 2
    assert values["bot_parked_requests"] == 1
    assert values["bot_parked_sessions"] == 1
    assert values["bot_uncertain_receipts"] == 1
    assert values["bot_queued_turn_oldest_age_seconds"] >= 0
    assert values["bot_parked_request_oldest_age_seconds"] >= 0


async def test_a_scrape_storm_reads_once_per_ttl(sql_store: SqlStore) -> None:
    now = [1000.0]
    collector = StoreGaugeCollector(sql_store, ttl=2.0, clock=lambda: now[0])
    for _ in range(10):
        await collector.refresh()
    assert collector.reads == 1
    now[0] += 2.5
    await collector.refresh()
    assert collector.reads == 2


async def test_a_database_that_is_gone_reads_as_down_never_as_an_error(sql_url: str) -> None:
    store = await SqlStore.open(sql_url)
    collector = StoreGaugeCollector(store, ttl=0.0)
    await collector.refresh()
    assert _values(collector)["bot_database_up"] == 1
    await store.close()
    await collector.refresh()
    assert _values(collector) == {"bot_database_up": 0}


async def test_before_any_scrape_nothing_is_claimed(sql_store: SqlStore) -> None:
    assert _values(StoreGaugeCollector(sql_store)) == {}
