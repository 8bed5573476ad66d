"""A long thread of short messages, through the engine on every store: under a model whose API
compacts the thread, the model is shown the whole thread until the compaction, then the thread
from the turn holding it, however many messages either is; `context_messages` bounds only a
thread no compaction will ever summarise.

The issue this answers: a thread was cut to its last `CONTEXT_MESSAGES` messages (400) long
before its tokens reached the compaction trigger (150,000 by default), silently forgetting its
start although the API would have summarised it; and a compaction older than those messages
was never loaded, so never sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent import (
    Agent,
    AssistantMessage,
    Message,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    TurnStatus,
    UserMessage,
)
from agent._messages import CompactionBlock
from agent.seams import ModelRequest

WINDOW = 4
"""`context_messages`: far fewer than the thread holds."""


def _reply(request: ModelRequest, step: int) -> ScriptedReply:
    opening = request.messages[-1]
    assert isinstance(opening, UserMessage)
    if opening.text == "compact now":
        return ScriptedReply(text="ok", compaction="what was said before")
    return ScriptedReply(text=f"ok {opening.text}")


async def _turns(store: SessionStore, model: ScriptedModel, texts: Sequence[str]) -> None:
    agent = Agent(name="a", instructions="Answer.")
    async with Runtime(
        store, model, agent=agent, poll_interval=0.02, context_messages=WINDOW
    ) as runtime:
        session = runtime.session(agent, "s1")
        for text in texts:
            result = await session.result(await session.start(text))
            assert result.status == TurnStatus.COMPLETED, result


def _openings(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, UserMessage)]


async def test_a_compacting_model_sees_the_thread_from_its_start_until_it_compacts(
    store: SessionStore,
) -> None:
    model = ScriptedModel(responder=_reply, compacts_context=True)
    early = [f"q{n}" for n in range(8)]

    await _turns(store, model, early)

    last = model.requests[-1].messages
    assert _openings(last) == early, "every message since the start, 15 of them"
    assert len(last) == 15


async def test_after_compacting_the_thread_is_sent_from_the_compaction_even_past_the_window(
    store: SessionStore,
) -> None:
    model = ScriptedModel(responder=_reply, compacts_context=True)
    before = [f"q{n}" for n in range(3)]
    after = [f"r{n}" for n in range(5)]

    await _turns(store, model, [*before, "compact now", *after])

    stored = await store.load_transcript("s1")
    holder = stored[7]
    assert isinstance(holder, AssistantMessage)
    assert isinstance(holder.content[0], CompactionBlock)
    assert _openings(model.requests[3].messages) == [*before, "compact now"]
    for request, sent in zip(model.requests[4:], range(1, 6), strict=True):
        assert _openings(request.messages) == ["compact now", *after[:sent]]
    assert len(model.requests[-1].messages) == 2 + 2 * 4 + 1 > WINDOW

    # Another worker picks the session up: it loads the thread from the compaction too.
    again = ScriptedModel(responder=_reply, compacts_context=True)
    await _turns(store, again, ["s0"])
    assert _openings(again.requests[0].messages) == ["compact now", *after, "s0"]


async def test_a_model_that_does_not_compact_keeps_the_window(store: SessionStore) -> None:
    model = ScriptedModel(responder=_reply)
    texts = [f"q{n}" for n in range(8)]

    await _turns(store, model, texts)
    again = ScriptedModel(responder=_reply)
    await _turns(store, again, ["q8"])

    for request in (model.requests[-1], again.requests[0]):
        assert len(request.messages) <= WINDOW + 1
        assert _openings(request.messages)[0] != "q0"
