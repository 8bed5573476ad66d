"""A scripted model for a whole session: each turn its own replies, picked by the turn's place in
the session, so a multi-turn conversation (and a replay of any of its turns) is deterministic."""

from __future__ import annotations

import pytest

from agent import Agent, Runtime, ScriptedModel, ScriptedReply, TurnStatus
from storage import MemoryStore

AGENT = Agent(name="chat", instructions="Chat.")


async def test_each_turn_of_a_session_gets_its_own_script() -> None:
    model = ScriptedModel(
        turns=[
            [ScriptedReply(text="First answer.")],
            [ScriptedReply(text="Second answer.")],
            [ScriptedReply(text="Third answer.")],
        ]
    )
    async with Runtime(MemoryStore(), model, agent=AGENT, poll_interval=0.01) as runtime:
        session = runtime.session(AGENT, "s1")
        answers = [(await session.turn(text)).text for text in ("hi", "and?", "thanks")]
        other = (await runtime.session(AGENT, "s2").turn("hello")).text
    assert answers == ["First answer.", "Second answer.", "Third answer."]
    assert other == "First answer."  # turns count per session


async def test_a_turn_past_the_script_fails_clearly() -> None:
    model = ScriptedModel(turns=[[ScriptedReply(text="Only one.")]])
    async with Runtime(MemoryStore(), model, agent=AGENT, poll_interval=0.01) as runtime:
        session = runtime.session(AGENT, "s1")
        await session.turn("hi")
        result = await session.turn("again")
    assert result.status is TurnStatus.FAILED
    assert "turn 1" in (result.error or "")


def test_turns_and_replies_are_one_or_the_other() -> None:
    with pytest.raises(ValueError, match="turns"):
        ScriptedModel([ScriptedReply(text="x")], turns=[[ScriptedReply(text="y")]])
