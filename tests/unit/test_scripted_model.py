"""The scripted model's request log: kept for tests to inspect, off for long runs."""

from __future__ import annotations

from agent import ScriptedModel, ScriptedReply, UserMessage
from agent.seams import ModelRequest


async def _ask(model: ScriptedModel) -> str:
    request = ModelRequest(system="s", messages=(UserMessage(turn_id="t", text="hi"),))
    chunks = [event async for event in model.stream(request)]
    return type(chunks[-1]).__name__


async def test_requests_are_kept_by_default_and_not_when_switched_off() -> None:
    kept = ScriptedModel([ScriptedReply(text="ok")])
    assert await _ask(kept)
    assert [r.system for r in kept.requests] == ["s"]

    unkept = ScriptedModel([ScriptedReply(text="ok")], keep_requests=False)
    assert await _ask(unkept) == await _ask(ScriptedModel([ScriptedReply(text="ok")]))
    assert unkept.requests == []
