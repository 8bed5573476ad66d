"""What a turn's result says, whatever way it ended: the text the model said (never made up),
the tokens its model steps used, and, when its last reply was empty, a `note` saying what the
turn did instead (its tools' outcomes) or that the agent had nothing to add."""

from __future__ import annotations

from typing import Any

import pytest

from agent import ScriptedModel, ScriptedReply, ToolCall, TriggerMessage
from tests.api.agents import AGENT, PAY
from tests.bot.agents import GATE, LONG
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")

SILENT_AFTER_TOOLS = [
    ScriptedReply(
        tool_calls=[
            ToolCall(id="c_lookup", name="lookup_order", input={"order_id": "42"}),
            ToolCall(id="c_gone", name="no_such_tool", input={}),
        ]
    ),
    ScriptedReply(text=""),
]
SILENT = [ScriptedReply(text="")]


def _silent_about_holds(request: Any, step: int) -> ScriptedReply:
    """Proposes a hold; says nothing in the turn that acts on the answer."""
    opening = next(m for m in reversed(request.messages) if m.role in ("user", "trigger"))
    if isinstance(opening, TriggerMessage):
        return ScriptedReply(text="")
    if step == 0:
        return ScriptedReply(
            text="Proposing a hold.",
            tool_calls=[ToolCall(id="c_hold", name="place_hold", input={"order_id": "42"})],
        )
    return ScriptedReply(text="The hold waits for your confirmation.")


def _usage(body: dict[str, Any]) -> tuple[int, int]:
    return body["usage"]["input_tokens"], body["usage"]["output_tokens"]


async def _poll(client, path: str, status: str) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        body: dict[str, Any] = (await client.get(path)).json()
        return body if body["status"] == status else None

    found: dict[str, Any] = await eventually(reached, within=30, what=status)
    return found


async def test_a_parked_turn_says_what_the_model_said_and_the_tokens_it_used(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(PAY))
    alice = clients(bot, "alice")

    parked = (await alice.post("/sessions/s/turns", json={"text": "refund", "turn_id": "t"})).json()

    assert parked["status"] == "suspended"
    assert parked["text"] == "Checking the refund."
    assert _usage(parked) == (10, 5)
    assert parked["note"] is None
    assert (await alice.get("/sessions/s/turns/t")).json()["usage"] == parked["usage"]
    answer = {"turn_id": "t", "input_id": "approve", "digest": parked["request"]["digest"]}
    assert (await alice.post("/sessions/s/resume", json={**answer, "value": True})).is_success
    done = await _poll(alice, "/sessions/s/turns/t", "completed")
    assert done["text"] == "Refund settled."
    assert _usage(done) == (20, 10), "both model steps of the turn, across the park"


async def test_a_cancelled_turn_says_what_the_model_said_and_the_tokens_it_used(
    db_url, api, clients
) -> None:
    GATE.pop("long", None)
    bot = await api(db_url, AGENT, ScriptedModel(LONG))
    alice = clients(bot, "alice")
    started = await alice.post("/sessions/s/turns?wait=0", json={"text": "go", "turn_id": "t"})
    assert started.status_code == 202

    async def in_the_tool() -> bool:
        events = (await alice.get("/sessions/s/events")).json()["events"]
        return "action.requested" in [e["type"] for e in events]

    await eventually(in_the_tool, within=30)
    assert (await alice.post("/sessions/s/cancel", json={"turn_id": "t"})).status_code == 200
    cancelled = await _poll(alice, "/sessions/s/turns/t", "cancelled")

    assert cancelled["text"] == "First part of the answer."
    assert _usage(cancelled) == (10, 5)
    assert cancelled["reason"] == "cancelled"


async def test_an_empty_final_reply_keeps_its_text_and_gets_a_note(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(SILENT_AFTER_TOOLS))
    alice = clients(bot, "alice")

    done = (await alice.post("/sessions/s/turns", json={"text": "go", "turn_id": "t"})).json()

    assert done["status"] == "completed"
    assert done["text"] == "", "the text is what the model said, never filled in"
    assert done["note"] == (
        "The agent added nothing after its tool calls: lookup_order (ok), no_such_tool (failed)."
    )
    assert (await alice.get("/sessions/s/turns/t")).json()["note"] == done["note"]


async def test_an_empty_reply_with_no_tools_says_the_agent_had_nothing_to_add(
    db_url, api, clients
) -> None:
    spoken = {"say something": [ScriptedReply(text="Something.")]}
    bot = await api(db_url, AGENT, ScriptedModel(SILENT, by_opening=spoken))
    alice = clients(bot, "alice")
    done = (await alice.post("/sessions/s/turns", json={"text": "go", "turn_id": "t"})).json()
    assert (done["status"], done["text"]) == ("completed", "")
    assert done["note"] == "The agent had nothing to add."
    said = (await alice.post("/sessions/o/turns", json={"text": "say something"})).json()
    assert (said["text"], said["note"]) == ("Something.", None), "a reply needs no note"


async def test_a_denied_write_followed_by_silence_is_noted_as_denied(db_url, api, clients) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(responder=_silent_about_holds))
    alice = clients(bot, "alice")
    proposed = await alice.post("/sessions/h/turns", json={"text": "hold 42", "turn_id": "t"})
    assert proposed.json()["status"] == "completed"
    [pending] = (await alice.get("/sessions/h/pending")).json()["confirmations"]

    denied = await alice.post(
        f"/sessions/h/confirmations/{pending['confirmation_id']}", json={"accepted": False}
    )
    assert denied.status_code == 202
    acted = await _poll(alice, denied.json()["poll"], "completed")

    assert acted["text"] == ""
    assert acted["note"] == "The agent added nothing after its tool calls: place_hold (denied)."
