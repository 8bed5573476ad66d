"""Durable effects with receipts: the FAN-7 ambiguous-timeout story end to end against an
inventory service with its own storage, each receipt transition, and the guard rails.

Every write here is confirmed first, as a write must be: a turn proposes it, the test approves it
(`tests.support.confirmations`), and the turn acting on the approval is the one that writes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent import (
    Agent,
    EffectNotAppliedError,
    ReceiptStatus,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    StepConflictError,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    resolve_receipt,
    tool,
)
from bot.core.asgi_server import BackgroundServer
from bot.testing.http import local_client
from tests.support import children
from tests.support.confirmations import approve_pending, turn_and_approve
from tests.support.effect_fixtures import fan_agent, fan_model
from tests.support.engine_fixtures import RUN_LOG_ENV, read_runs
from tests.support.inventory_service import InventoryService

KEY = "reserve_inventory:FAN-7"


@pytest.fixture
def inventory(tmp_path: Path) -> Iterator[tuple[InventoryService, str]]:
    service = InventoryService(tmp_path / "inventory.db", {"FILTER-A": 4})
    with BackgroundServer(service.app) as server:  # a thread: the test's loop may block
        yield service, server.url


def _rt(store: SessionStore, agent: Agent, model: ScriptedModel) -> Runtime:
    return Runtime(store, model, agent=agent, recovery_interval=0.05, poll_interval=0.02)


def _tool_results(transcript: list[Any]) -> list[Any]:
    return [m for m in transcript if isinstance(m, ToolMessage)]


async def test_fan7_steps_1_to_3(sql_store: Any, inventory: Any) -> None:
    store = sql_store
    service, url = inventory
    agent = fan_agent(url, timeout=0.3)
    async with _rt(store, agent, fan_model()) as rt:
        session = rt.session(agent, "fan")

        # 1. the reservation commits at the service but the response is lost
        service.lose_response[KEY] = 1.5
        first = await turn_and_approve(session, "reserve two FILTER-A for FAN-7")
        receipt = await store.get_receipt("fan", KEY)
        assert receipt is not None
        assert receipt.status == ReceiptStatus.UNCERTAIN
        assert service.stock("FILTER-A") == 2
        error = _tool_results(await store.load_transcript("fan"))[-1].result["error"]
        assert error.startswith("EffectUncertainError:")
        assert "uncertain" in error
        assert "person" in error
        assert first.text.startswith("Could not reserve")

        # ... and no later turn retries it blindly
        service.lose_response.clear()
        await turn_and_approve(session, "try FAN-7 again")
        assert service.reserve_calls == 1
        assert (await store.get_receipt("fan", KEY)).status == ReceiptStatus.UNCERTAIN

        # 2. recovery by receipt lookup at the service; an operator resolves the receipt
        observed = service.receipt(KEY)
        assert observed is not None
        resolved = await resolve_receipt(store, "fan", KEY, status="completed", value=observed)
        assert resolved.status == ReceiptStatus.COMPLETED
        third = await turn_and_approve(session, "now open the work order for FAN-7")
        assert third.text == "Work order opened."
        assert service.reserve_calls == 1, (
            "the completed receipt answers; the service is not called"
        )
        assert service.stock("FILTER-A") == 2
        latest = _tool_results(await store.load_transcript("fan"))
        assert latest[-2].result["reservation"] == observed

        # 3. same key, another quantity: conflict, nothing sent, nothing changed
        conflict_model = fan_model(quantity=1)
        rt.model = conflict_model
        await turn_and_approve(session, "reserve one FILTER-A for FAN-7")
        error = _tool_results(await store.load_transcript("fan"))[-1].result["error"]
        assert error.startswith("EffectConflictError:")
        assert service.reserve_calls == 1
        assert service.stock("FILTER-A") == 2
        assert service.reservations() == [("FILTER-A", 2)]


async def test_service_itself_refuses_a_changed_payload_under_a_key(inventory: Any) -> None:
    service, url = inventory
    async with local_client(base_url=url) as client:
        ok = await client.post(
            "/reservations",
            json={"sku": "FILTER-A", "quantity": 2},
            headers={"Idempotency-Key": "K"},
        )
        again = await client.post(
            "/reservations",
            json={"sku": "FILTER-A", "quantity": 2},
            headers={"Idempotency-Key": "K"},
        )
        changed = await client.post(
            "/reservations",
            json={"sku": "FILTER-A", "quantity": 1},
            headers={"Idempotency-Key": "K"},
        )
    assert again.json()["reservation"] == ok.json()["reservation"]
    assert changed.status_code == 409
    assert service.stock("FILTER-A") == 2


async def _run(url: str, service_url: str, run_log: Path, *args: str) -> children.Process:
    return await children.start(
        "tests.support.effect_child",
        *(url, service_url, "fan", "T1", *args),
        env={RUN_LOG_ENV: str(run_log)},
    )


async def _kill_before_settle(url: str, service_url: str, run_log: Path) -> None:
    proc = await _run(url, service_url, run_log, "--crash-before-settle")
    try:
        assert (await children.wait_line(proc, "AT ")).strip() == "AT settle"
    finally:
        await children.kill(proc)


async def _recover(url: str, service_url: str, run_log: Path, *extra: str) -> str:
    lines = await children.finish(await _run(url, service_url, run_log, "--recover-only", *extra))
    return lines[-1]


async def test_fan7_step_4_kill_after_the_service_committed_then_reconcile(
    sql_store: Any, sql_url: str, inventory: Any, tmp_path: Path
) -> None:
    service, url = inventory
    run_log = tmp_path / "runs.log"
    await _kill_before_settle(sql_url, url, run_log)
    # the world moved on: the reservation exists at the service
    assert service.stock("FILTER-A") == 2
    assert service.reservations() == [("FILTER-A", 2)]
    # the engine's pending intent is there, unsettled
    pending = await sql_store.get_receipt("fan", KEY)
    assert pending is not None
    assert pending.status == ReceiptStatus.PREPARED

    recovered = await _recover(sql_url, url, run_log, "--reconcile")
    assert recovered == "RESULT completed Work order opened."
    settled = await sql_store.get_receipt("fan", KEY)
    assert settled.status == ReceiptStatus.COMPLETED
    assert settled.receipt_id == pending.receipt_id, "the same receipt was reconciled"
    assert settled.value == service.receipt(KEY)
    runs = read_runs(run_log)
    assert runs == ["reserve:call", "reserve:lookup", "work_order"], (
        "reconciled before the work order step, and the provider was called once"
    )
    # independent of the engine: one reservation, stock moved once
    assert service.reservations() == [("FILTER-A", 2)]
    assert service.stock("FILTER-A") == 2
    assert service.reserve_calls == 1


async def test_sigkill_between_fn_and_receipt_commit_leaves_it_uncertain(
    sql_store: Any, sql_url: str, inventory: Any, tmp_path: Path
) -> None:
    service, url = inventory
    run_log = tmp_path / "runs.log"
    await _kill_before_settle(sql_url, url, run_log)
    last = await _recover(sql_url, url, run_log)
    assert last.startswith("RESULT completed Could not reserve: EffectUncertainError")
    receipt = await sql_store.get_receipt("fan", KEY)
    assert receipt.status == ReceiptStatus.UNCERTAIN
    assert read_runs(run_log) == ["reserve:call"], "no blind retry after the crash"
    assert service.reserve_calls == 1


# transitions and guard rails -----------------------------------------------------------------

CALLS: list[str] = []


def _effect_tool(outcome: Any, *, effect: str = "write") -> Any:
    @tool(name="pay", effect=effect, confirmation="required")  # type: ignore[call-overload]
    async def pay(order: str, ctx: ToolContext) -> Any:
        """Charge."""

        async def charge(authority: Any) -> Any:
            CALLS.append(authority.idempotency_key)
            return outcome(authority)

        effect_result = await ctx.run_effect(f"charge:{order}", charge)
        return {"value": effect_result.value, "status": effect_result.receipt.status.value}

    return pay


def _pay_model(order: str = "o1") -> ScriptedModel:
    return ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="p", name="pay", input={"order": order})]),
            ScriptedReply(text="done"),
        ]
    )


async def _pay(store: SessionStore, tool_: Any, key: str = "s1", order: str = "o1") -> Any:
    agent = Agent(name="a", instructions="x", tools=[tool_])
    async with _rt(store, agent, _pay_model(order)) as rt:
        await turn_and_approve(rt.session(agent, key), "pay")
    return _tool_results(await store.load_transcript(key))[-1]


async def test_completed_effect_is_deduplicated_across_turns(store: SessionStore) -> None:
    CALLS.clear()
    pay = _effect_tool(lambda a: {"charged": a.receipt_id})
    first = await _pay(store, pay)
    second = await _pay(store, pay)
    assert first.result == second.result
    assert first.result["status"] == "completed"
    assert CALLS == ["pay:charge:o1"]
    receipt = await store.get_receipt("s1", "pay:charge:o1")
    assert receipt.turn_id != (await store.list_turns("s1"))[-1].turn_id  # metadata only


async def test_not_applied_fails_the_receipt_and_allows_a_retry(store: SessionStore) -> None:
    CALLS.clear()
    attempts = iter([EffectNotAppliedError("card declined before charging"), {"charged": True}])

    def outcome(authority: Any) -> Any:
        value = next(attempts)
        if isinstance(value, Exception):
            raise value
        return value

    pay = _effect_tool(outcome)
    first = await _pay(store, pay)
    assert first.result["error"] == "EffectNotAppliedError: card declined before charging"
    assert (await store.get_receipt("s1", "pay:charge:o1")).status == ReceiptStatus.FAILED
    second = await _pay(store, pay)
    assert second.result == {"value": {"charged": True}, "status": "completed"}
    receipt = await store.get_receipt("s1", "pay:charge:o1")
    assert (receipt.status, receipt.attempt) == (ReceiptStatus.COMPLETED, 2)
    assert len(CALLS) == 2


async def test_unknown_failure_is_uncertain_until_an_operator_resolves_it(
    store: SessionStore,
) -> None:
    CALLS.clear()

    def outcome(authority: Any) -> Any:
        raise TimeoutError("gateway timed out")

    pay = _effect_tool(outcome)
    first = await _pay(store, pay)
    assert first.result["error"].startswith("EffectUncertainError: the outcome of pay:charge:o1")
    again = await _pay(store, pay)
    assert again.result["error"].startswith("EffectUncertainError")
    assert len(CALLS) == 1
    receipts = await store.list_receipts(status=ReceiptStatus.UNCERTAIN)
    assert [r.key for r in receipts] == ["pay:charge:o1"]
    await resolve_receipt(store, "s1", "pay:charge:o1", status="failed")
    assert (await store.get_receipt("s1", "pay:charge:o1")).status == ReceiptStatus.FAILED
    with pytest.raises(StepConflictError):  # only an uncertain receipt can be resolved
        await resolve_receipt(store, "s1", "pay:charge:o1", status="completed")


async def test_an_operator_resolution_says_completed_with_a_value_or_failed_without(
    store: SessionStore,
) -> None:
    def outcome(authority: Any) -> Any:
        raise TimeoutError("gateway timed out")

    await _pay(store, _effect_tool(outcome))
    for status, value in (("failed", {"charged": 1}), ("uncertain", None), ("prepared", None)):
        with pytest.raises(ValueError, match=r"failed|completed"):
            await resolve_receipt(store, "s1", "pay:charge:o1", status=status, value=value)
    assert (await store.get_receipt("s1", "pay:charge:o1")).status == ReceiptStatus.UNCERTAIN
    before = time.time()
    settled = await resolve_receipt(
        store, "s1", "pay:charge:o1", status=ReceiptStatus.COMPLETED, value={"charged": 1}
    )
    assert settled.value == {"charged": 1}
    assert settled.updated_at >= before


async def test_guard_rails(store: SessionStore) -> None:
    read_tool = _effect_tool(lambda a: 1, effect="read")
    error = (await _pay(store, read_tool, key="g1")).result["error"]
    assert "not declared effect='write'" in error

    @tool(effect="write", confirmation="capability", name="pay")
    async def sloppy(order: str) -> str:
        """Writes without coordination."""
        return "charged"

    error = (await _pay(store, sloppy, key="g2")).result["error"]
    assert "without calling ctx.run_effect" in error

    @tool(effect="write", confirmation="required", name="pay")
    async def blank(order: str, ctx: ToolContext) -> Any:
        """Empty key."""
        return await ctx.run_effect("", lambda a: _noop())

    error = (await _pay(store, blank, key="g3")).result["error"]
    assert "must not be empty" in error


async def _noop() -> int:
    return 1


def _interruptible_pay(entered: asyncio.Event, *, park: bool = False) -> Any:
    """A write whose provider call is still in flight when the test interrupts it: it never
    answers (a shutdown cancels it), or it asks a person from inside the call (a park)."""

    @tool(name="pay", effect="write", confirmation="required")
    async def pay(order: str, ctx: ToolContext) -> Any:
        """Charge."""

        async def charge(authority: Any) -> Any:
            CALLS.append(authority.idempotency_key)
            entered.set()
            if park:
                return await ctx.request_input(id="approve", prompt="charge?", answerers=None)
            await asyncio.Event().wait()

        effect_result = await ctx.run_effect(f"charge:{order}", charge)
        return {"value": effect_result.value}

    return pay


async def test_shutdown_during_an_effect_stops_the_turn_and_leaves_the_receipt_uncertain(
    store: SessionStore,
) -> None:
    CALLS.clear()
    entered = asyncio.Event()
    agent = Agent(name="a", instructions="x", tools=[_interruptible_pay(entered)])
    model = _pay_model()
    rt = _rt(store, agent, model)
    rt.start_recovery()
    try:
        session = rt.session(agent, "s1")
        await session.turn("pay", turn_id="T1")
        [proposed] = await store.list_confirmations("s1")
        before = len(model.requests)
        # the approved call runs first in the turn acting on the approval: no model call before
        approved = await session.confirm(proposed.confirmation_id, True)
        await asyncio.wait_for(entered.wait(), 60)
        asked = len(model.requests)
    finally:
        await rt.close(grace=0.1)

    assert asked == len(model.requests) == before, "the model was called again after shutdown"
    turn = await store.get_turn("s1", approved)
    assert turn is not None
    assert turn.status == TurnStatus.RUNNING, "the turn must be left for another worker"
    receipt = await store.get_receipt("s1", "pay:charge:o1")
    assert receipt is not None
    assert receipt.status == ReceiptStatus.UNCERTAIN
    assert receipt.error is not None
    assert receipt.error.startswith("CancelledError")

    # the next worker finds the uncertain receipt and does not call the provider again
    later = _pay_model()
    async with _rt(store, agent, later) as rt2:
        result = await rt2.session(agent, "s1").result(approved)
    assert (result.status, result.text) == (TurnStatus.COMPLETED, "done")
    error = _tool_results(await store.load_transcript("s1"))[-1].result["error"]
    assert error.startswith("EffectUncertainError: the outcome of pay:charge:o1")
    assert CALLS == ["pay:charge:o1"]
    settled = await resolve_receipt(store, "s1", "pay:charge:o1", status="failed")
    assert settled.status == ReceiptStatus.FAILED


async def test_a_park_inside_an_effect_parks_the_turn(store: SessionStore) -> None:
    CALLS.clear()
    entered = asyncio.Event()
    agent = Agent(name="a", instructions="x", tools=[_interruptible_pay(entered, park=True)])
    async with _rt(store, agent, _pay_model()) as rt:
        session = rt.session(agent, "s1")
        await session.turn("pay", turn_id="T1")
        [result] = await approve_pending(session)
    assert result.status == TurnStatus.SUSPENDED
    assert result.request is not None
    assert result.request.id == "approve"
    receipt = await store.get_receipt("s1", "pay:charge:o1")
    assert receipt is not None
    assert receipt.status == ReceiptStatus.UNCERTAIN, "the call may have written before parking"


async def test_replayed_turn_runs_nothing(sql_store: Any, inventory: Any) -> None:
    store = sql_store
    service, url = inventory
    agent = fan_agent(url)
    model = fan_model()
    async with _rt(store, agent, model) as rt:
        session = rt.session(agent, "fan")
        proposed = await session.turn("reserve", turn_id="T1")
        [first] = await approve_pending(session)
        calls, requests = service.reserve_calls, len(model.requests)
        proposed_again = await session.turn("reserve", turn_id="T1")
        await session.start("reserve", turn_id="T1")
        again = await session.turn("reserve", turn_id=first.turn_id)
        await session.start("reserve", turn_id=first.turn_id)
    assert proposed.text == proposed_again.text == "The reservation awaits approval."
    assert first.text == again.text == "Work order opened."
    assert (proposed.replayed, proposed_again.replayed) == (False, True)
    assert (first.replayed, again.replayed) == (False, True)
    # two model steps to propose, two after the approved call: none of them again
    assert (service.reserve_calls, len(model.requests)) == (calls, requests) == (1, 4)
    assert len(await store.list_confirmations("fan")) == 1, "a replay asks nobody again"


async def test_facts_are_versioned_with_lineage(store: SessionStore) -> None:
    @tool
    async def remember(city: str, ctx: ToolContext) -> str:
        """Record the delivery city."""
        assert ctx.facts is not None
        ctx.facts.put("delivery_city", city)
        return city

    agent = Agent(name="a", instructions="x", tools=[remember])

    def model_for(city: str) -> ScriptedModel:
        return ScriptedModel(
            [
                ScriptedReply(tool_calls=[ToolCall(id="m", name="remember", input={"city": city})]),
                ScriptedReply(text="ok"),
            ]
        )

    for city in ("Lyon", "Oslo"):
        async with _rt(store, agent, model_for(city)) as rt:
            await rt.session(agent, "s1").turn(f"ship to {city}", turn_id=f"T-{city}")
    latest = await store.get_fact("s1", "delivery_city")
    assert latest is not None
    assert (latest.version, latest.value, latest.turn_id) == (2, "Oslo", "T-Oslo")
    assert (latest.step_id, latest.call_id) == ("tool:5:m", "m")
    history = await store.fact_history("s1", "delivery_city")
    assert [(f.version, f.value) for f in history] == [(1, "Lyon"), (2, "Oslo")]
