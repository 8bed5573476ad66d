"""The engine asks of a model exactly what the `Model` Protocol declares, and no more.

An adapter whose stream is a plain `AsyncIterator` (no `aclose`, as the Protocol allows) once
failed every turn: the loop closed the stream with `contextlib.aclosing`.
"""

from __future__ import annotations

from agent import Agent, Runtime, TextBlock, TurnStatus
from agent.seams import ModelReply, TextDelta
from storage import MemoryStore
from tests.support.plain_model import PlainModel


async def test_a_model_written_only_to_the_protocol_runs_a_turn() -> None:
    agent = Agent(name="plain", instructions="Be brief.")
    model = PlainModel(
        [
            TextDelta(text="Hello, "),
            TextDelta(text="world"),
            ModelReply(content=(TextBlock(text="Hello, world"),), stop_reason="end_turn"),
        ]
    )
    store = MemoryStore()

    async with Runtime(store, model, agent=agent, poll_interval=0.02) as runtime:
        result = await runtime.session(agent, "s1").turn("hi")

    assert (result.status, result.error) == (TurnStatus.COMPLETED, None)
    assert result.text == "Hello, world"
    assert not hasattr(model.opened[0], "aclose")
