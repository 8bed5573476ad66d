"""A refused turn and a paused one, through the engine, the real SDK and the Anthropic stand-in.

- A refusal commits what the user was shown, completes the turn with a note saying the model
  declined, and is left out of every later request, its opening and its tool calls with it
  (the streaming-refusals doc: the turn that drew it must go, or it is refused again).
- A pause is not the end of the turn: the paused message goes back, as it is, and the model
  continues it; the turn's text is the whole answer, said once.

Runs on every store.
"""

from __future__ import annotations

from typing import Any

from anthropic import AsyncAnthropic

from agent import (
    Agent,
    AnthropicModel,
    AssistantMessage,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    TurnStatus,
    tool,
)
from agent._stops import DECLINED, MAX_PAUSES
from tests.support.anthropic_standin import AnthropicStandin, Text, ToolUse, sse_reply

MODEL = "claude-sonnet-4-6"
WHY = "This request was declined because it could enable cyber harm."


@tool
def lookup(order: str) -> dict[str, Any]:
    """Look an order up."""
    return {"order": order, "paid": 30}


AGENT = Agent(name="desk", instructions="Help with orders.", tools=[lookup])


def texts(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [
        (m["role"], [b.get("text") or b.get("name") or b["type"] for b in m["content"]])
        for m in body["messages"]
    ]


async def test_a_refused_turn_is_shown_as_declined_and_never_sent_again(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(
        sse_reply(Text("Hi there.")),
        sse_reply(Text("Checking."), ToolUse("tu_1", "lookup", {"order": "42"})),
        sse_reply(Text("Sure, the"), stop_reason="refusal", refusal=WHY),
        sse_reply(Text("Order 7 is paid.")),
    )
    model = AnthropicModel(client=client, model=MODEL, restart_delay=0)
    async with Runtime(store, model, agent=AGENT, poll_interval=0.02) as runtime:
        session = runtime.session(AGENT, "s1")
        await session.turn("hello", turn_id="T1")
        refused = await session.turn("something it refuses", turn_id="T2")
        after = await session.turn("is order 7 paid?", turn_id="T3")

    assert refused.status == TurnStatus.COMPLETED
    assert refused.text == "Sure, the", "what the user was shown stays what it was"
    assert refused.note is not None
    assert refused.note.startswith(DECLINED)
    assert WHY in refused.note
    assert after.status == TurnStatus.COMPLETED
    assert after.note is None
    assert texts(api.bodies[-1]) == [
        ("user", ["hello"]),
        ("assistant", ["Hi there."]),
        ("user", ["is order 7 paid?"]),
    ], "the refused turn, its tool call and result too, is left out whole"
    transcript = await store.load_transcript("s1")
    kept = [m for m in transcript if isinstance(m, AssistantMessage) and m.turn_id == "T2"]
    assert [m.stop_reason for m in kept] == ["tool_use", "refusal"], "the record keeps it"
    events = await store.read_events("s1", 0, 100)
    [done] = [e for e in events if e.type == "turn.completed" and e.turn_id == "T2"]
    assert done.declined == refused.note  # type: ignore[union-attr]


async def test_an_empty_refusal_is_not_a_failure_but_a_plain_decline(store: SessionStore) -> None:
    model = ScriptedModel([ScriptedReply(stop_reason="refusal")])
    async with Runtime(store, model, agent=AGENT, poll_interval=0.02) as runtime:
        result = await runtime.session(AGENT, "s1").turn("something it refuses")

    assert (result.status, result.text) == (TurnStatus.COMPLETED, "")
    assert result.note is not None
    assert result.note.startswith(DECLINED)


async def test_the_tool_calls_of_a_refusal_never_run(store: SessionStore) -> None:
    ran: list[str] = []

    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return "ok"

    agent = Agent(name="a", instructions="x", tools=[refund])
    cut = ScriptedReply(
        text="Refunding.", tool_calls=[("c1", "refund", {"order": "A-1"})], stop_reason="refusal"
    )
    async with Runtime(store, ScriptedModel([cut]), agent=agent, poll_interval=0.02) as runtime:
        result = await runtime.session(agent, "s1").turn("refund A-1")

    assert ran == []
    assert (result.status, result.text) == (TurnStatus.COMPLETED, "Refunding.")
    [stored] = [m for m in await store.load_transcript("s1") if isinstance(m, AssistantMessage)]
    assert (stored.stop_reason, stored.tool_calls) == ("refusal", ())


async def test_a_paused_turn_is_continued_and_its_answer_said_once(
    store: SessionStore, api: AnthropicStandin, client: AsyncAnthropic
) -> None:
    api.enqueue(
        sse_reply(Text("Working on it."), stop_reason="pause_turn"),
        sse_reply(Text("Done: it is paid.")),
    )
    model = AnthropicModel(client=client, model=MODEL, restart_delay=0)
    async with Runtime(store, model, agent=AGENT, poll_interval=0.02) as runtime:
        result = await runtime.session(AGENT, "s1").turn("check order 42", turn_id="T1")

    assert result.status == TurnStatus.COMPLETED
    assert result.text == "Working on it.\n\nDone: it is paid."
    _first, second = api.bodies
    assert texts(second) == [
        ("user", ["check order 42"]),
        ("assistant", ["Working on it."]),
    ], "the paused message goes back as it is, last, for the model to continue"
    steps = await store.load_steps("s1", "T1")
    assert steps["model:1"] == {"stop_reason": "pause_turn"}
    assert steps["model:2"] == {"stop_reason": "end_turn"}
    events = await store.read_events("s1", 0, 100)
    assert [e.text for e in events if e.type == "message.completed"] == [  # type: ignore[union-attr]
        "Working on it.",
        "Done: it is paid.",
    ]


async def test_a_model_that_never_stops_pausing_fails_the_turn(store: SessionStore) -> None:
    model = ScriptedModel(responder=lambda request, step: ScriptedReply(stop_reason="pause_turn"))
    async with Runtime(store, model, agent=AGENT, poll_interval=0.02) as runtime:
        result = await runtime.session(AGENT, "s1").turn("go on forever")

    assert result.status == TurnStatus.FAILED
    assert f"paused its turn {MAX_PAUSES + 1} times in a row" in (result.error or "")
    assert len(model.requests) == MAX_PAUSES + 1
