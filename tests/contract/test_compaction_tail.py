"""The `SessionStore` contract for a thread the API compacts, on every store (`memory`,
`sqlite`, `postgres`): `load_transcript_tail(..., since_compaction=True)` starts at the opening
of the turn holding the newest compaction block, however far back it lies, or at the session's
start when there is none; never where a message count would cut it.

A compaction block stands for everything before it, so a worker resuming a compacting session
needs exactly that much, and the store must find it without reading the transcript: sessions
reach tens of thousands of messages (the SQL read is checked against its plan in
`test_sql_store.py`).
"""

from __future__ import annotations

from agent import (
    AssistantMessage,
    Message,
    SessionStore,
    TextBlock,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    TurnInput,
    UserMessage,
)
from agent._messages import CompactionBlock
from agent.seams import Lease, StepCommit

S = "slack:T1:C1:200.0"
TTL = 30.0
NOW = 1_000.0


def _said(turn: str, text: str, *, compaction: str | None = None) -> AssistantMessage:
    blocks: tuple[CompactionBlock | TextBlock, ...] = (TextBlock(text=text),)
    if compaction is not None:
        blocks = (CompactionBlock(content=compaction), *blocks)
    return AssistantMessage(turn_id=turn, content=blocks, stop_reason="end_turn")


def _exchange(turn: str, *, compaction: str | None = None) -> list[Message]:
    """One turn with a tool call; its last reply holds the compaction block, if any (the API
    compacts at whichever request of the turn passes the trigger)."""
    return [
        UserMessage(turn_id=turn, text=f"ask {turn}"),
        AssistantMessage(
            turn_id=turn,
            content=(ToolCall(id=f"{turn}-1", name="lookup", input={}),),
            stop_reason="tool_use",
        ),
        ToolMessage(turn_id=turn, call_id=f"{turn}-1", name="lookup", result="found"),
        _said(turn, f"done {turn}", compaction=compaction),
    ]


async def _lease(store: SessionStore, turn_id: str = "t1") -> Lease:
    await store.enqueue_turn(S, turn_id, TurnInput(text="hi"))
    lease = await store.acquire_lease(S, "w1", TTL, NOW)
    assert lease is not None
    return lease


async def _append(store: SessionStore, lease: Lease, messages: list[Message], at: int) -> None:
    """Committed a few at a time, as turns commit them."""
    for start in range(0, len(messages), 3):
        chunk = list(enumerate(messages[start : start + 3], start=at + start))
        await store.commit(lease, StepCommit(turn_id="t1", messages=chunk), TTL, NOW)


async def test_the_tail_starts_at_the_turn_holding_the_newest_compaction(
    store: SessionStore,
) -> None:
    thread = [
        *_exchange("a"),
        *_exchange("b", compaction="summary up to b"),
        *_exchange("c"),
        *_exchange("d", compaction="summary up to d"),
        TriggerMessage(turn_id="e", text="scheduled", by="clock", kind="schedule"),
        _said("e", "done e"),
    ]
    lease = await _lease(store)
    await _append(store, lease, thread, 0)

    tail = await store.load_transcript_tail(S, 1, since_compaction=True)

    assert (tail.base, tail.messages) == (12, thread[12:])  # d's opening: its call and result
    windowed = await store.load_transcript_tail(S, 1)
    assert windowed.base == 16, "without compaction, the message window stands"


async def test_a_compaction_far_older_than_the_window_is_still_where_the_tail_starts(
    store: SessionStore,
) -> None:
    thread = _exchange("a") + _exchange("b", compaction="summary up to b")
    for n in range(40):
        thread += [UserMessage(turn_id=f"q{n}", text="ok?"), _said(f"q{n}", "ok")]
    lease = await _lease(store)
    await _append(store, lease, thread, 0)

    tail = await store.load_transcript_tail(S, 2, since_compaction=True)

    assert tail.base == 4
    assert tail.messages == thread[4:]
    assert len(tail.messages) == 84


async def test_without_a_compaction_the_tail_is_the_whole_session(store: SessionStore) -> None:
    assert await store.load_transcript_tail(S, 3, since_compaction=True) == (
        await store.load_transcript_tail(S, 3)
    )
    thread: list[Message] = []
    for n in range(30):
        thread += [UserMessage(turn_id=f"q{n}", text="ok?"), _said(f"q{n}", "ok")]
    # A compaction block without content summarises nothing (the engine never starts there).
    thread += _exchange("z", compaction=None)
    thread[-1] = AssistantMessage(
        turn_id="z", content=(CompactionBlock(content=None), TextBlock(text="z")), stop_reason="x"
    )
    lease = await _lease(store)
    await _append(store, lease, thread, 0)

    tail = await store.load_transcript_tail(S, 3, since_compaction=True)

    assert (tail.base, tail.messages) == (0, thread)


async def test_the_marker_stays_with_its_generation_across_a_reset(store: SessionStore) -> None:
    """The archived generation keeps its compaction (read back whole); the new generation
    starts with none, so its tail is its own start, until it compacts in turn."""
    old = _exchange("a") + _exchange("b", compaction="summary of the old generation")
    lease = await _lease(store)
    await _append(store, lease, old, 0)
    await store.enqueue_reset(S, "reset:1")
    await store.release_lease(lease)
    lease = await _lease(store, "t2")
    await store.apply_reset(lease, "reset:1", [], TTL, NOW)

    assert (await store.read_archive(S, 0)).messages == old
    empty = await store.load_transcript_tail(S, 1, since_compaction=True)
    assert (empty.base, empty.messages) == (0, [])

    new = _exchange("c") + _exchange("d") + _exchange("e")
    await _append(store, lease, new, 0)
    tail = await store.load_transcript_tail(S, 1, since_compaction=True)
    assert (tail.base, tail.messages) == (0, new)

    more = _exchange("f", compaction="summary of the new generation") + _exchange("g")
    await _append(store, lease, more, len(new))
    tail = await store.load_transcript_tail(S, 1, since_compaction=True)
    assert (tail.base, tail.messages) == (len(new), more)
