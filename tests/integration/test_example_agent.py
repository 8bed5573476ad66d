"""The default agent (`examples/ops_agent`) as a user meets it: orders are placed without racing
on a table, a refund is proposed, approved by the requester (or the configured approvers) and
paid exactly once through the payments stand-in, and a refusal or an impossible refund pays
nothing."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from agent import (
    Agent,
    ConfirmationStatus,
    PolicyAnswerer,
    Quorum,
    ReceiptStatus,
    ResumeAuthorizationError,
    ResumeConflictError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolMessage,
    TurnStatus,
    UserAnswerer,
    grant_confirmation,
    load_agent,
)
from agent.models import opening_text
from agent.seams import ModelRequest
from storage import SqlStore, upgrade_database
from storage.migrate import alembic_config
from tests.support.hitl_fixtures import slack_event

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ops_agent"
SESSION = "slack:T1:C1:1700000000.000100"
POLICY = {"policy": "refund-approvers", "scope": "refunds"}


def _ops_agent(monkeypatch: pytest.MonkeyPatch, url: str, approvers: str | None = None) -> Agent:
    """Load the example as `bot serve` does, configured through the environment it reads."""
    monkeypatch.setenv("DATABASE_URL", url)
    if approvers is None:
        monkeypatch.delenv("OPS_REFUND_APPROVERS", raising=False)
    else:
        monkeypatch.setenv("OPS_REFUND_APPROVERS", approvers)
    return load_agent(EXAMPLE, emitted_sources=["slack"])


def _last_order_id(messages: Sequence[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, ToolMessage) and isinstance(message.result, dict):
            order_id = message.result.get("order_id")
            if isinstance(order_id, str):
                return order_id
    raise AssertionError("no order was placed before the refund was asked for")


def _model(*, price: float = 18.5, refund: float = 18.5, order_id: str | None = None) -> Any:
    """Places an order for "order …", looks it up for "look …", proposes a refund of it for
    "refund …", and reports whatever else (the follow-up turn after a confirmation answer)."""

    def respond(request: ModelRequest, step: int) -> ScriptedReply:
        opening = opening_text(request.messages)
        if opening.startswith("order") and step == 0:
            return ScriptedReply(
                tool_calls=[
                    ToolCall(
                        id="call_order",
                        name="create_order",
                        input={"item": "blue mug", "quantity": 1, "unit_price": price},
                    )
                ]
            )
        if opening.startswith("look") and step == 0:
            named = [word for word in opening.split() if word.startswith("ord_")]
            target = named[0] if named else _last_order_id(request.messages)
            return ScriptedReply(
                tool_calls=[
                    ToolCall(id="call_lookup", name="lookup_order", input={"order_id": target})
                ]
            )
        if opening.startswith("ask") and step == 0:
            question = "Does the customer keep the damaged mug?"
            return ScriptedReply(
                tool_calls=[
                    ToolCall(id="call_ask", name="ask_requester", input={"question": question})
                ]
            )
        if opening.startswith("refund") and step == 0:
            target = order_id or _last_order_id(request.messages)
            return ScriptedReply(
                text="I'll propose the refund.",
                tool_calls=[
                    ToolCall(
                        id="call_refund",
                        name="issue_refund",
                        input={"order_id": target, "amount": refund},
                    )
                ],
            )
        return ScriptedReply(text="Done.")

    return ScriptedModel(responder=respond)


async def _refunds(url: str) -> list[dict[str, Any]]:
    """What the payments stand-in recorded, read straight from its table."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "select refund_id, idempotency_key, order_id, amount_cents "
                    "from ops_refunds order by refund_id"
                )
            )
            return [dict(row._mapping) for row in rows]
    finally:
        await engine.dispose()


async def _propose(rt: Runtime, agent: Agent, store: SqlStore) -> tuple[Any, str, str]:
    """Place an order, then have a mention by U1 propose its refund; returns the session, the
    pending confirmation id and the order id."""
    session = rt.session(agent, SESSION)
    placed = await session.turn(slack_event("order a blue mug", user="U1"), turn_id="T0")
    assert placed.status == TurnStatus.COMPLETED
    proposed = await session.turn(slack_event("refund my order", user="U1"), turn_id="T1")
    assert proposed.status == TurnStatus.COMPLETED
    [pending] = await store.list_confirmations(SESSION)
    assert pending.status == ConfirmationStatus.PENDING
    assert pending.tool == "issue_refund"
    return session, pending.confirmation_id, pending.arguments["order_id"]


def _rt(store: SqlStore, model: Any, agent: Agent) -> Runtime:
    return Runtime(store, model, agent=agent, poll_interval=0.02)


async def test_concurrent_first_orders_all_succeed_on_postgres(
    monkeypatch: pytest.MonkeyPatch, postgres_url: str
) -> None:
    agent = _ops_agent(monkeypatch, postgres_url)
    store = await SqlStore.open(postgres_url)
    try:
        async with _rt(store, _model(), agent) as rt:
            sessions = [rt.session(agent, f"slack:T1:C1:{i}") for i in range(17)]
            results = await asyncio.gather(*(s.turn("order a blue mug") for s in sessions))
        assert {r.status for r in results} == {TurnStatus.COMPLETED}
        placed = [(await store.load_transcript(f"slack:T1:C1:{i}"))[2] for i in range(17)]
    finally:
        await store.close()
    assert all(isinstance(m, ToolMessage) and not m.is_error for m in placed), [
        m.result for m in placed if isinstance(m, ToolMessage) and m.is_error
    ]
    engine = create_async_engine(postgres_url)
    try:
        async with engine.connect() as conn:
            count = (await conn.execute(text("select count(*) from ops_orders"))).scalar_one()
    finally:
        await engine.dispose()
    assert count == 17


async def test_requester_approves_and_the_refund_is_paid_once(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(), agent) as rt:
            session, confirmation_id, order_id = await _propose(rt, agent, store)
            [pending] = await store.list_confirmations(SESSION)
            assert pending.answerers == UserAnswerer(user="U1"), "the requester answers by default"
            assert await _refunds(sql_url) == [], "proposing must not refund"

            with pytest.raises(ResumeAuthorizationError):
                await session.confirm(confirmation_id, True, by="U2")
            assert await _refunds(sql_url) == []

            follow_up = await session.confirm(confirmation_id, True, by="U1")
            done = await session.result(follow_up)
            assert done.status == TurnStatus.COMPLETED

            [receipt] = await store.list_receipts(session=SESSION)
            assert receipt.status == ReceiptStatus.COMPLETED
            [refund] = await _refunds(sql_url)
            assert refund["idempotency_key"] == f"{SESSION}/{receipt.key}"
            assert (refund["order_id"], refund["amount_cents"]) == (order_id, 1850)
            result = next(
                m
                for m in await store.load_transcript(SESSION)
                if isinstance(m, ToolMessage) and m.turn_id == follow_up
            )
            assert not result.is_error
            assert isinstance(result.result, dict)
            assert result.result["refund_id"] == refund["refund_id"]

            # Slack redelivers the follow-up, or a second click arrives: nothing is paid again.
            assert (await session.turn("again", turn_id=follow_up)).replayed
            await session.start("again", turn_id=follow_up)
            assert (await session.result(follow_up)).text == done.text
            with pytest.raises(ResumeConflictError):
                await session.confirm(confirmation_id, True, by="U1")
    finally:
        await store.close()
    assert await _refunds(sql_url) == [refund]


class _DiesBeforeSettling:
    """The store as a worker sees it that dies after the provider answered and before the
    receipt recorded the answer: settling never returns, until the worker is torn down."""

    def __init__(self, inner: SqlStore) -> None:
        self._inner = inner
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def settle_receipt(self, *args: Any, **kwargs: Any) -> Any:
        self.reached.set()
        await asyncio.Event().wait()


async def test_a_worker_dying_after_the_refund_is_reconciled_not_paid_again(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        dying = _DiesBeforeSettling(store)
        first = Runtime(dying, _model(), agent=agent, lease_ttl=0.5, poll_interval=0.02)
        async with first:
            session, confirmation_id, _ = await _propose(first, agent, store)
            follow_up = await session.confirm(confirmation_id, True, by="U1")
            async with asyncio.timeout(30):
                await dying.reached.wait()
            await first.close(grace=0.01)
        [paid] = await _refunds(sql_url)
        [pending] = await store.list_receipts(session=SESSION)
        assert pending.status == ReceiptStatus.PREPARED

        second = Runtime(store, _model(), agent=agent, recovery_interval=0.05, poll_interval=0.02)
        async with second:
            async with asyncio.timeout(30):
                done = await second.session(agent, SESSION).result(follow_up)
            assert done.status == TurnStatus.COMPLETED
        [settled] = await store.list_receipts(session=SESSION)
        result = next(
            m
            for m in await store.load_transcript(SESSION)
            if isinstance(m, ToolMessage) and m.turn_id == follow_up
        )
    finally:
        await store.close()
    assert (settled.status, settled.receipt_id) == (ReceiptStatus.COMPLETED, pending.receipt_id)
    assert isinstance(result.result, dict)
    assert result.result["refund_id"] == paid["refund_id"]
    assert await _refunds(sql_url) == [paid], "reconciled at the provider, not paid twice"


async def test_the_payments_stand_in_honours_its_idempotency_key(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    """A retry that reaches the provider again (a crash after it paid, before the receipt was
    settled) gets the first refund back, never a second one; `find` is what reconciles it."""
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(), agent) as rt:
            await rt.session(agent, SESSION).turn(slack_event("order a mug"), turn_id="T0")
        order_id = _last_order_id(await store.load_transcript(SESSION))
    finally:
        await store.close()
    payments = _payments_module(agent)
    async with payments.PaymentsStandIn.open(sql_url) as provider:
        assert await provider.find("k1") is None
        first = await provider.refund(order_id=order_id, amount_cents=500, idempotency_key="k1")
        retry = await provider.refund(order_id=order_id, amount_cents=500, idempotency_key="k1")
        assert retry == first
        assert await provider.find("k1") == first
        with pytest.raises(payments.RefundRefused, match="different"):
            await provider.refund(order_id=order_id, amount_cents=700, idempotency_key="k1")
    assert [r["refund_id"] for r in await _refunds(sql_url)] == [first["refund_id"]]


def _payments_module(agent: Agent) -> Any:
    """The stand-in module exactly as the loaded tool imported it."""
    tool = next(t for t in agent.tools if t.name == "issue_refund")
    package = tool.fn.__module__.rsplit(".tools.", 1)[0]
    return sys.modules[f"{package}.payments"]


async def test_listed_approvers_replace_the_requester(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    agent = _ops_agent(monkeypatch, sql_url, approvers="U2, U3")
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(), agent) as rt:
            session, confirmation_id, _ = await _propose(rt, agent, store)
            [pending] = await store.list_confirmations(SESSION)
            assert pending.answerers == PolicyAnswerer(**POLICY)

            for outsider in ("U1", "U9"):
                grant = await grant_confirmation(
                    session,
                    confirmation_id,
                    by=outsider,
                    principal={"team": "T1", "user": outsider},
                )
                assert grant is None
                with pytest.raises(ResumeAuthorizationError):
                    await session.confirm(confirmation_id, True, by=outsider, granted=grant)
            assert await _refunds(sql_url) == []

            grant = await grant_confirmation(
                session, confirmation_id, by="U3", principal={"team": "T1", "user": "U3"}
            )
            follow_up = await session.confirm(confirmation_id, True, by="U3", granted=grant)
            assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
    finally:
        await store.close()
    assert len(await _refunds(sql_url)) == 1


async def test_a_refund_over_100_needs_two_listed_approvers(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    """$150 of a $150 order: two of the listed approvers must approve (a `Quorum`), each vote
    counted once; the refund is paid once, at the second approval, and no sooner."""
    agent = _ops_agent(monkeypatch, sql_url, approvers="U2, U3, U4")
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(price=150, refund=150), agent) as rt:
            session, confirmation_id, _ = await _propose(rt, agent, store)
            [pending] = await store.list_confirmations(SESSION)
            assert pending.answerers == Quorum(2, users=["U2", "U3", "U4"])
            with pytest.raises(ResumeAuthorizationError):
                await session.confirm(confirmation_id, True, principal=_person("U1"))
            follow_up = await session.confirm(confirmation_id, True, principal=_person("U3"))
            assert await session.confirm(confirmation_id, True, principal=_person("U3"))
            assert await store.get_turn(SESSION, follow_up) is None
            assert await _refunds(sql_url) == []
            await session.confirm(confirmation_id, True, principal=_person("U2"))
            assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
    finally:
        await store.close()
    [paid] = await _refunds(sql_url)
    assert paid["amount_cents"] == 15_000


async def test_a_small_first_refund_is_approved_by_policy_a_second_asks_a_person(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    """With `OPS_AUTO_REFUND_LIMIT=5`, $3 of an order is refunded at once, recorded as approved
    by `small-refunds`; a second $3 of the same order (the rule reads the refunds table) waits
    for the requester, as does anything over the limit."""
    monkeypatch.setenv("OPS_AUTO_REFUND_LIMIT", "5")
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(price=18.5, refund=3), agent) as rt:
            session = rt.session(agent, SESSION)
            await session.turn(slack_event("order a blue mug", user="U1"), turn_id="T0")
            first = await session.turn(slack_event("refund my order", user="U1"), turn_id="T1")
            assert first.status == TurnStatus.COMPLETED
            [auto] = await store.list_confirmations(SESSION)
            assert (auto.status, auto.by) == (ConfirmationStatus.ACCEPTED, "policy:small-refunds")
            assert auto.reason is not None
            assert "within the $5.00 limit" in auto.reason
            [paid] = await _refunds(sql_url)
            assert paid["amount_cents"] == 300

            await session.turn(slack_event("refund it again", user="U1"), turn_id="T2")
            statuses = [c.status for c in await store.list_confirmations(SESSION)]
            assert statuses == [ConfirmationStatus.ACCEPTED, ConfirmationStatus.PENDING]
    finally:
        await store.close()
    assert len(await _refunds(sql_url)) == 1


def _person(user: str) -> dict[str, str]:
    return {"team": "T1", "user": user}


async def test_lookup_shows_what_is_left_to_refund(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(refund=5.0), agent) as rt:
            session, confirmation_id, order_id = await _propose(rt, agent, store)
            await session.result(await session.confirm(confirmation_id, True, by="U1"))
            await session.turn(slack_event("look it up", user="U1"), turn_id="T2")
            missing = rt.session(agent, "slack:T1:C1:other")
            await missing.turn(slack_event("look up ord_nope", user="U1"), turn_id="T3")
        found = (await store.load_transcript(SESSION))[-2]
        unknown = (await store.load_transcript("slack:T1:C1:other"))[-2]
    finally:
        await store.close()
    assert isinstance(found, ToolMessage)
    assert found.result == {
        "order_id": order_id,
        "item": "blue mug",
        "quantity": 1,
        "paid": 18.5,
        "refunded": 5.0,
    }
    assert isinstance(unknown, ToolMessage)
    assert unknown.result == {"error": "ToolError: no order ord_nope"}


async def test_a_denied_refund_pays_nothing(monkeypatch: pytest.MonkeyPatch, sql_url: str) -> None:
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(), agent) as rt:
            session, confirmation_id, _ = await _propose(rt, agent, store)
            follow_up = await session.confirm(confirmation_id, False, by="U1")
            assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        assert await store.list_receipts(session=SESSION) == []
    finally:
        await store.close()
    assert await _refunds(sql_url) == []


@pytest.mark.parametrize(
    ("refund", "order_id", "reason"),
    [
        (25.0, None, r"more than the \$18\.50 left on order"),
        (5.0, "ord_unknown", "no order ord_unknown"),
        (-1.0, None, "must be positive"),
    ],
    ids=["over-the-amount", "unknown-order", "negative"],
)
async def test_an_impossible_refund_is_refused_and_pays_nothing(
    monkeypatch: pytest.MonkeyPatch,
    sql_url: str,
    refund: float,
    order_id: str | None,
    reason: str,
) -> None:
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(refund=refund, order_id=order_id), agent) as rt:
            session, confirmation_id, _ = await _propose(rt, agent, store)
            follow_up = await session.confirm(confirmation_id, True, by="U1")
            assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        result = next(
            m
            for m in await store.load_transcript(SESSION)
            if isinstance(m, ToolMessage) and m.turn_id == follow_up
        )
        [receipt] = await store.list_receipts(session=SESSION)
    finally:
        await store.close()
    assert result.is_error
    assert isinstance(result.result, dict)
    assert result.result["error"].startswith("RefundRefused: ")
    assert re.search(reason, result.result["error"]), result.result["error"]
    assert receipt.status == ReceiptStatus.FAILED, "nothing was applied, so a retry is allowed"
    assert await _refunds(sql_url) == []


async def test_asking_the_requester_parks_until_they_answer(
    monkeypatch: pytest.MonkeyPatch, sql_url: str
) -> None:
    """The example's parking tool: the turn waits, durably, for the speaker alone; their answer
    and its reason come back to the model; a turn nobody spoke cannot park there."""
    agent = _ops_agent(monkeypatch, sql_url)
    store = await SqlStore.open(sql_url)
    try:
        async with _rt(store, _model(), agent) as rt:
            session = rt.session(agent, SESSION)
            parked = await session.start(slack_event("ask them", user="U1"), turn_id="T1")
            assert (await session.result(parked)).status == TurnStatus.SUSPENDED
            [pending] = await session.pending()
            assert pending.prompt == "Does the customer keep the damaged mug?"
            assert pending.answerers == UserAnswerer(user="U1")
            with pytest.raises(ResumeAuthorizationError):
                await session.resume(parked, pending.id, True, by="U2")
            await session.resume(parked, pending.id, False, by="U1", reason="it goes back first")
            assert (await session.result(parked)).status == TurnStatus.COMPLETED

            nobody = rt.session(agent, "slack:T1:C1:cron")
            await nobody.turn(slack_event("ask them", user="U1", attested=False), turn_id="T2")
        [answered] = [m for m in await store.load_transcript(SESSION) if isinstance(m, ToolMessage)]
        [refused] = [
            m for m in await store.load_transcript("slack:T1:C1:cron") if isinstance(m, ToolMessage)
        ]
    finally:
        await store.close()
    assert isinstance(answered.result, dict)
    assert answered.result["answer"] == "no"
    assert answered.result["note"] == "it goes back first"
    assert refused.is_error, "an unattested speaker cannot answer, so the tool cannot park"


def test_upgrade_keeps_the_ops_orders_table_older_code_made(tmp_path: Path) -> None:
    """Older `create_order` made `ops_orders (item, quantity)` at call time; `bot db upgrade`
    must neither fail on it nor drop what it holds."""
    url = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.upgrade(config, "0002")
            conn.execute(text("create table ops_orders (item text not null, quantity integer)"))
            conn.execute(text("insert into ops_orders (item, quantity) values ('blue mug', 2)"))
        asyncio.run(upgrade_database(url))
        with engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("ops_orders")}
            kept = conn.execute(text("select item, quantity from ops_orders_before_0003")).all()
            tables = set(inspect(conn).get_table_names())
    finally:
        engine.dispose()
    assert {"order_id", "amount_cents"} <= columns
    assert [tuple(row) for row in kept] == [("blue mug", 2)]
    assert "ops_refunds" in tables
