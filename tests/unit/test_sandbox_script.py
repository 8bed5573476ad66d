"""What the sandbox's offline model answers, through the engine and the demo agent's real tools:
the refund story for text that asks for one (approved, or denied with the person's reason),
the carrier lookup for a shipment question, an echo for anything else."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent import Runtime, ScriptedModel, ToolCall, TurnStatus, UserMessage
from agent.seams import ModelRequest
from bot.cli.demo import DEMO_AGENT
from bot.cli.sandbox.script import sandbox_reply
from storage import SqlStore


@pytest.fixture
async def store(sqlite_url: str) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(sqlite_url)
    yield opened
    await opened.close()


def model() -> ScriptedModel:
    return ScriptedModel(responder=sandbox_reply)


async def test_a_broken_order_asks_for_its_refund_and_says_it_was_paid(store: SqlStore) -> None:
    async with Runtime(store, model(), agent=DEMO_AGENT, poll_interval=0.01) as runtime:
        session = runtime.session(DEMO_AGENT, "sandbox:1")
        turn_id = await session.start("order 9 arrived broken, can you help?")
        parked = await session.result(turn_id)
        assert parked.status is TurnStatus.SUSPENDED
        [pending] = await session.pending()
        assert pending.prompt == "Approve a $18.50 refund on order 9?"
        await session.resume(turn_id, pending.id, True, by="U1")
        result = await session.result(turn_id)
    assert result.status is TurnStatus.COMPLETED
    assert result.text.endswith("$18.50 was refunded on order 9.")


async def test_a_denied_refund_quotes_the_reason(store: SqlStore) -> None:
    async with Runtime(store, model(), agent=DEMO_AGENT, poll_interval=0.01) as runtime:
        session = runtime.session(DEMO_AGENT, "sandbox:2")
        turn_id = await session.start("please refund order 12")
        await session.result(turn_id)
        [pending] = await session.pending()
        await session.resume(turn_id, pending.id, False, by="U1", reason="it was a gift")
        result = await session.result(turn_id)
    assert "no refund on order 12" in result.text
    assert "You said: “it was a gift”." in result.text


async def test_other_text_is_echoed_with_what_to_try(store: SqlStore) -> None:
    async with Runtime(store, model(), agent=DEMO_AGENT, poll_interval=0.01) as runtime:
        result = await runtime.session(DEMO_AGENT, "sandbox:3").turn("what  is\nthe weather?")
    assert result.status is TurnStatus.COMPLETED
    assert result.text.startswith("You wrote: “what is the weather?”.")
    assert "order 42 arrived broken" in result.text


def test_a_shipment_question_asks_the_carrier_for_that_order() -> None:
    request = ModelRequest(
        system="", messages=[UserMessage(turn_id="t", text="Where is my parcel for order 31?")]
    )
    reply = sandbox_reply(request, 0).reply()
    calls = [block for block in reply.content if isinstance(block, ToolCall)]
    assert [(c.name, c.input) for c in calls] == [("track_shipment", {"order_id": "31"})]
