"""The feed's ordering rules, against a session whose log and live events the test controls:
each durable event once and in seq order whatever the hub brings (late, twice, with gaps), and
a live delta only while the reader is where it was emitted."""

from __future__ import annotations

from collections.abc import Callable

from agent import MessageCompleted, MessageDelta, TurnEvent
from bot.api.feed import Feed

KEY = "api:T:s"


class FakeSession:
    """`observe` and `events`, the two calls a feed makes, over a log the test appends to."""

    def __init__(self) -> None:
        self.log: list[TurnEvent] = []
        self.observers: list[Callable[[TurnEvent], None]] = []

    async def observe(self, callback: Callable[[TurnEvent], None]) -> Callable[[], None]:
        self.observers.append(callback)
        return lambda: self.observers.remove(callback)

    async def events(self, after_seq: int = 0) -> list[TurnEvent]:
        return [e for e in self.log if e.seq > after_seq]

    def commit(self, seq: int, *, emit: bool = True) -> TurnEvent:
        event = MessageCompleted(session=KEY, turn_id="t", seq=seq, index=seq, text=f"m{seq}")
        self.log.append(event)
        if emit:
            self.emit(event)
        return event

    def emit(self, event: TurnEvent) -> None:
        for callback in list(self.observers):
            callback(event)


def delta(text: str, after: int = 0) -> MessageDelta:
    return MessageDelta(session=KEY, turn_id="t", text=text, after=after)


async def test_what_the_hub_and_the_log_both_bring_is_sent_once_in_order() -> None:
    session = FakeSession()
    session.commit(1, emit=False)
    async with Feed(session, after=0) as feed:  # type: ignore[arg-type]
        late = session.commit(2)  # committed after the subscription, before the read
        assert [e.seq for e in await feed.catch_up()] == [1]  # 2 comes from the queue
        assert [e.seq for e in await feed.next(0.01)] == [2]
        session.emit(late)  # a relay bringing it again
        assert await feed.next(0.01) == []
        session.commit(3)
        assert [e.seq for e in await feed.next(0.01)] == [3]
    assert session.observers == []


async def test_a_gap_is_filled_from_the_log() -> None:
    session = FakeSession()
    async with Feed(session, after=0) as feed:  # type: ignore[arg-type]
        session.commit(1, emit=False)  # the hub never brought it (another process, no Redis)
        session.commit(2)
        assert [e.seq for e in await feed.next(0.01)] == [1, 2]
        session.commit(3, emit=False)
        assert [e.seq for e in await feed.next(0.01)] == [3]  # found by the poll


async def test_a_delta_is_sent_only_where_it_was_emitted() -> None:
    session = FakeSession()
    session.commit(1, emit=False)
    async with Feed(session, after=0) as feed:  # type: ignore[arg-type]
        await feed.catch_up()
        session.emit(delta("now", after=1))
        assert [e.text for e in await feed.next(0.01)] == ["now"]  # type: ignore[union-attr]
        session.emit(delta("unplaced"))  # emitted here before the hub brought any event: sent
        assert [e.type for e in await feed.next(0.01)] == ["message.delta"]
        session.commit(2, emit=False)
        session.commit(3, emit=False)
        session.emit(delta("ahead", after=3))  # relayed before this reader saw 2 and 3
        got = await feed.next(0.01)
        assert [e.seq for e in got] == [2, 3, 0]
        session.emit(delta("behind", after=2))  # its step committed as 3: already sent
        assert await feed.next(0.01) == []


async def test_the_first_read_leaves_to_the_queue_what_it_holds() -> None:
    """A reader subscribed before the turn started gets its deltas in their place, however
    late its first read of the log."""
    session = FakeSession()
    async with Feed(session, after=0) as feed:  # type: ignore[arg-type]
        session.commit(1)
        session.emit(delta("typing"))
        session.commit(2)
        assert await feed.catch_up() == []
        got = [*await feed.next(0.01), *await feed.next(0.01), *await feed.next(0.01)]
        assert [(e.type, e.seq) for e in got] == [
            ("message.completed", 1),
            ("message.delta", 0),
            ("message.completed", 2),
        ]


async def test_a_delta_whose_step_the_reader_got_from_the_log_is_dropped() -> None:
    session = FakeSession()
    async with Feed(session, after=0) as feed:  # type: ignore[arg-type]
        session.commit(1)
        assert [e.seq for e in await feed.next(0.01)] == [1]
        session.commit(2, emit=False)
        assert [e.seq for e in await feed.catch_up()] == [2]  # a poll, ahead of the hub
        session.emit(delta("typing"))  # emitted after 1, before 2 reached this process
        assert await feed.next(0.01) == []


async def test_a_reader_too_slow_for_the_queue_reads_the_log_instead() -> None:
    from bot.api import feed as module

    session = FakeSession()
    async with Feed(session, after=0) as feed:  # type: ignore[arg-type]
        for seq in range(1, module.MAX_QUEUED + 3):
            session.commit(seq)
        got = [*await feed.next(0.01), *await feed.next(0.01), *await feed.next(0.01)]
        assert [e.seq for e in got] == list(range(1, module.MAX_QUEUED + 3))
        assert await feed.next(0.01) == []
