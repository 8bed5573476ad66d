"""`EventHub` with an `EventRelay` connected: what it sends, what it asks for, what it delivers,
and that a broken relay never reaches a turn."""

from __future__ import annotations

import asyncio
import logging

import pytest

from agent import EventHub, MessageDelta, RecordingSink, TurnEvent, TurnStarted


class FakeRelay:
    def __init__(self) -> None:
        self.published: list[TurnEvent] = []
        self.watching: list[str] = []
        self.calls: list[tuple[str, str]] = []

    def publish(self, event: TurnEvent) -> None:
        self.published.append(event)

    def watch(self, session: str) -> None:
        self.watching.append(session)
        self.calls.append(("watch", session))

    def unwatch(self, session: str) -> None:
        self.watching.remove(session)
        self.calls.append(("unwatch", session))


class BrokenRelay(FakeRelay):
    def publish(self, event: TurnEvent) -> None:
        raise RuntimeError("relay down")

    def watch(self, session: str) -> None:
        raise RuntimeError("relay down")


def started(session: str = "s1", seq: int = 1) -> TurnStarted:
    return TurnStarted(session=session, turn_id="t", seq=seq, text="hi")


async def test_the_hub_sends_what_it_emits_and_asks_for_what_is_observed() -> None:
    hub, relay = EventHub(), FakeRelay()
    early = hub.subscribe(lambda e: None, session="s1")
    hub.connect(relay)
    assert relay.watching == ["s1"], "sessions observed before the relay came"
    second = hub.subscribe(lambda e: None, session="s1")
    hub.subscribe(lambda e: None, session="s2")
    hub.subscribe(lambda e: None)  # every session: asks for nothing in particular
    assert relay.watching == ["s1", "s2"]
    early()
    early()  # twice is once
    assert relay.watching == ["s1", "s2"], "s1 still has an observer"
    second()
    assert relay.watching == ["s2"]

    await hub.emit(started("s9"))
    assert relay.published == [started("s9")], "everything emitted here, observed or not"
    hub.connect(None)
    assert relay.watching == []
    await hub.emit(started("s9", 2))
    assert len(relay.published) == 1


async def test_delivered_events_reach_observers_only() -> None:
    sink, relay = RecordingSink(), FakeRelay()
    hub = EventHub(sink)
    hub.connect(relay)
    mine: list[TurnEvent] = []
    everything: list[TurnEvent] = []
    hub.subscribe(mine.append, session="s1")
    hub.subscribe(everything.append)

    delta = MessageDelta(session="s1", turn_id="t", text="hi", after=1)
    hub.deliver(started())
    hub.deliver(delta)
    hub.deliver(started("s2"))
    assert mine == [started(), delta]
    assert everything == [started(), delta, started("s2")]
    assert relay.published == [], "nothing received is sent again"
    assert sink.events == [], "the host's sink gets this process's own events"


async def test_a_slow_observer_does_not_hold_up_delivery_and_keeps_the_order() -> None:
    hub = EventHub()
    seen: list[int] = []
    gate = asyncio.Event()

    async def slow(event: TurnEvent) -> None:
        await gate.wait()
        seen.append(event.seq)

    hub.subscribe(slow, session="s1")
    for seq in (1, 2, 3):
        hub.deliver(started(seq=seq))  # returns at once
    assert seen == []
    gate.set()
    for _ in range(10):
        await asyncio.sleep(0)  # each handled in turn, no timer involved
    assert seen == [1, 2, 3]


async def test_a_broken_relay_never_reaches_the_turn(caplog: pytest.LogCaptureFixture) -> None:
    hub, sink = EventHub(), RecordingSink()
    hub.subscribe(sink.emit, session="s1")
    hub.connect(BrokenRelay())
    await hub.emit(started())
    assert sink.events == [started()]
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors
    assert all("event relay failed" in r.getMessage() for r in errors)


async def test_observers_get_their_sessions_events_in_the_order_they_subscribed() -> None:
    hub, relay = EventHub(), FakeRelay()
    hub.connect(relay)
    got: list[tuple[str, str, int]] = []
    subs = {
        name: hub.subscribe(
            lambda e, name=name: got.append((name, e.session, e.seq)),  # type: ignore[misc]
            session=session,
        )
        for name, session in [("a", "s1"), ("all", None), ("b", "s1"), ("c", "s2")]
    }
    others = [hub.subscribe(lambda e: None, session=f"x{i}") for i in range(1000)]
    await hub.emit(started("s1", 1))
    hub.deliver(started("s2", 2))
    await hub.emit(started("s3", 3))
    assert got == [
        ("a", "s1", 1),
        ("all", "s1", 1),
        ("b", "s1", 1),
        ("all", "s2", 2),
        ("c", "s2", 2),
        ("all", "s3", 3),
    ]
    for unsubscribe in [*subs.values(), *others]:
        unsubscribe()
        unsubscribe()  # twice is harmless
    got.clear()
    await hub.emit(started("s1", 4))
    assert got == []
    assert relay.watching == [], "every session's last observer left"
