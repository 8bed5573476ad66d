"""The `EventSink` contract, run against every implementation: `RecordingSink`, and `EventHub`
as seen by a subscriber (sync or async) and by the sink it forwards to (the runtime's own set-up:
a host's sink behind the hub).

The seam has two sides, and both are checked on each sink:
- what a sink must do: take every event in the order it was emitted, unchanged, and never raise
  into the turn;
- what the engine promises a sink: per session, the events in commit order; durable events
  numbered as in the session's log (every one delivered, once), live deltas with seq 0 and only
  inside their model step; a turn that is re-delivered after it finished emits nothing.

`EventHub` fans out to observers a turn must neither fail because of nor wait long on: the last
group checks that a failing or stuck observer (or sink) leaves the turn and the other observers
alone and itself loses nothing, while a quick one is awaited (its reaction, a cancel say, is in
place at the turn's next checkpoint). No Redis sink exists: the Redis event relay
(`storage.redis.events`) is not a sink but hangs off the hub (`tests/unit/test_hub_relay.py`,
`tests/integration/test_live_events.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from agent import (
    ActionCompleted,
    ActionRequested,
    Agent,
    ConfirmationRequest,
    ConfirmationRequested,
    ConfirmationResolved,
    EventHub,
    EventSink,
    InputRequest,
    InputRequested,
    MessageCompleted,
    MessageDelta,
    RecordingSink,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    TurnCancelled,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnStarted,
    TurnStatus,
    tool,
)
from storage import MemoryStore

WAIT = 30.0
"""Bounds a wait that only a broken implementation would exhaust (not a timing assertion)."""


@dataclass
class Probe:
    sink: EventSink
    received: Callable[[], list[TurnEvent]]


def _recording() -> Probe:
    sink = RecordingSink()
    return Probe(sink, lambda: sink.events)


def _hub_subscriber() -> Probe:
    hub, seen = EventHub(), list[TurnEvent]()
    hub.subscribe(seen.append)
    return Probe(hub, lambda: seen)


def _hub_async_subscriber() -> Probe:
    hub, seen = EventHub(), list[TurnEvent]()

    async def observe(event: TurnEvent) -> None:
        await asyncio.sleep(0)
        seen.append(event)

    hub.subscribe(observe)
    return Probe(hub, lambda: seen)


def _hub_downstream() -> Probe:
    downstream = RecordingSink()
    return Probe(EventHub(downstream), lambda: downstream.events)


SINKS = {
    "recording": _recording,
    "hub-subscriber": _hub_subscriber,
    "hub-async-subscriber": _hub_async_subscriber,
    "hub-downstream": _hub_downstream,
}


@pytest.fixture(params=sorted(SINKS))
def probe(request: pytest.FixtureRequest) -> Probe:
    return SINKS[request.param]()


def _request(turn_id: str) -> InputRequest:
    return InputRequest(
        id="q1", prompt="Sure?", turn_id=turn_id, call_id="c1", tool="lookup", digest="d1"
    )


def _confirmation(turn_id: str) -> ConfirmationRequest:
    return ConfirmationRequest(
        id="k1", turn_id=turn_id, call_id="c1", tool="lookup", arguments={}, prompt="Sure?"
    )


def one_of_each(session: str, turn_id: str, first_seq: int) -> list[TurnEvent]:
    """Every event type, durable ones numbered from `first_seq`, deltas with 0."""
    call = ToolCall(id="c1", name="lookup", input={"q": "x"})
    n = iter(range(first_seq, first_seq + 100))
    where = {"session": session, "turn_id": turn_id}
    return [
        TurnStarted(**where, seq=next(n), text="hi"),
        MessageDelta(**where, text="Look"),
        MessageDelta(**where, text="", restart=True),
        MessageDelta(**where, text="Looking."),
        MessageCompleted(**where, seq=next(n), index=1, text="Looking."),
        ActionRequested(**where, seq=next(n), call=call),
        ActionCompleted(**where, seq=next(n), call_id="c1", name="lookup", result={"n": 1}),
        ActionCompleted(**where, seq=next(n), call_id="c2", name="lookup", error="KeyError: x"),
        InputRequested(**where, seq=next(n), request=_request(turn_id)),
        ConfirmationRequested(**where, seq=next(n), confirmation=_confirmation(turn_id)),
        ConfirmationResolved(**where, seq=next(n), confirmation_id="k1", accepted=True, by="U1"),
        TurnFailed(**where, seq=next(n), error="ModelError: down"),
        TurnCancelled(**where, seq=next(n), reason="replaced"),
        TurnCompleted(**where, seq=next(n), text="done"),
    ]


class Arrivals:
    """What an observer was handed, and a way to wait until enough of it is there."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []
        self._changed = asyncio.Event()

    def add(self, event: TurnEvent) -> None:
        self.events.append(event)
        self._changed.set()

    async def until(self, enough: Callable[[list[TurnEvent]], bool]) -> list[TurnEvent]:
        async with asyncio.timeout(WAIT):
            while not enough(self.events):
                self._changed.clear()
                await self._changed.wait()
        return self.events


# -- what a sink must do ----------------------------------------------------------------------


async def test_every_event_arrives_once_unchanged_and_in_order(probe: Probe) -> None:
    one = one_of_each("s1", "t1", 1)
    two = one_of_each("s2", "t2", 1)
    interleaved = [event for pair in zip(one, two, strict=True) for event in pair]

    for event in interleaved:
        assert await probe.sink.emit(event) is None

    received = probe.received()  # even an async observer: a quick one is awaited
    assert received == interleaved
    assert [e for e in received if e.session == "s1"] == one


# -- what the engine promises a sink ----------------------------------------------------------


@tool
async def lookup(item: str) -> dict[str, int]:
    """Stock of an item."""
    return {"stock": 7}


AGENT = Agent(name="shop", instructions="Answer from stock.", tools=[lookup])
SCRIPT = [
    ScriptedReply(
        text=["Let me ", "check."],
        tool_calls=[ToolCall(id="a", name="lookup", input={"item": "mug"})],
    ),
    ScriptedReply(text=["Seven ", "mugs."]),
]


def _runtime(store: MemoryStore, sink: EventSink) -> Runtime:
    model = ScriptedModel(by_opening={"How many mugs?": SCRIPT, "And cups?": SCRIPT})
    return Runtime(store, model, agent=AGENT, sink=sink, poll_interval=0.02)


def _check_session(received: list[TurnEvent], durable: list[TurnEvent]) -> None:
    """Durable events as in the log (all of them, once, same seqs); deltas inside a model step."""
    assert [e for e in received if e.seq > 0] == durable
    assert [e.seq for e in durable] == list(range(1, len(durable) + 1))
    in_step = False
    for event in received:
        match event.type:
            case "message.delta":
                assert event.seq == 0
                assert in_step, "a delta outside a model step"
            case "turn.started" | "action.completed":
                in_step = True  # the next model step streams
            case "message.completed":
                in_step = False
            case _:
                pass


async def test_a_session_s_events_arrive_in_commit_order_with_their_seqs(probe: Probe) -> None:
    store = MemoryStore()
    async with _runtime(store, probe.sink) as rt:
        first, second = rt.session(AGENT, "s1"), rt.session(AGENT, "s2")
        results = await asyncio.gather(
            first.turn("How many mugs?", turn_id="t1"), second.turn("And cups?", turn_id="t2")
        )
        again = await first.turn("How many mugs?", turn_id="t3")
    assert [r.status for r in [*results, again]] == [TurnStatus.COMPLETED] * 3

    for key in ("s1", "s2"):
        durable = await store.read_events(key)
        received = [e for e in probe.received() if e.session == key]
        _check_session(received, durable)
        texts = [e.text for e in received if isinstance(e, MessageDelta)]
        assert texts[:4] == ["Let me ", "check.", "Seven ", "mugs."]
    assert [e.type for e in probe.received() if e.turn_id == "t3"][-1] == "turn.completed"


async def test_a_finished_turn_delivered_again_emits_nothing(probe: Probe) -> None:
    store = MemoryStore()
    async with _runtime(store, probe.sink) as rt:
        session = rt.session(AGENT, "s1")
        await session.turn("How many mugs?", turn_id="t1")
        # A sink may still be catching up (a turn waits on it only so long): the snapshot is
        # taken once it has the turn's last event.
        async with asyncio.timeout(WAIT):
            while True:
                if any(e.type == "turn.completed" for e in probe.received()):
                    break
                await asyncio.sleep(0.01)  # a sink offers nothing to wait on
        before = list(probe.received())
        replayed = await session.turn("How many mugs?", turn_id="t1")
        await session.start("How many mugs?", turn_id="t1")
        await session.result("t1")
        await asyncio.sleep(0.05)  # room for anything wrongly emitted to arrive

    assert replayed.replayed
    assert probe.received() == before


# -- EventHub: observers a turn neither fails because of nor waits on -------------------------


def _events(n: int, session: str = "s1") -> list[TurnEvent]:
    return [MessageDelta(session=session, turn_id="t1", text=str(i)) for i in range(n)]


async def test_observers_see_only_their_session_and_turn() -> None:
    hub = EventHub()
    everything, s1, t2 = list[TurnEvent](), list[TurnEvent](), list[TurnEvent]()
    hub.subscribe(everything.append)
    hub.subscribe(s1.append, session="s1")
    hub.subscribe(t2.append, session="s1", turn_id="t2")
    events = [
        TurnStarted(session=s, turn_id=t, seq=1, text="hi")
        for s, t in [("s1", "t1"), ("s2", "t2"), ("s1", "t2")]
    ]

    for event in events:
        await hub.emit(event)

    assert everything == events
    assert s1 == [events[0], events[2]]
    assert t2 == [events[2]]


async def test_failing_observers_and_sink_leave_the_turn_and_each_other_alone() -> None:
    class Broken:
        async def emit(self, event: TurnEvent) -> None:
            raise RuntimeError("sink down")

    hub = EventHub(Broken())
    seen, tried = list[TurnEvent](), list[TurnEvent]()

    def sync_failure(event: TurnEvent) -> None:
        tried.append(event)
        raise ValueError("observer bug")

    async def async_failure(event: TurnEvent) -> None:
        raise ValueError("observer bug")

    hub.subscribe(sync_failure)
    hub.subscribe(async_failure)
    hub.subscribe(seen.append)
    events = _events(3)

    for event in events:
        await hub.emit(event)

    assert seen == events
    assert tried == events  # a failure does not unsubscribe: the next event is still offered


async def test_a_quick_async_observer_is_done_before_emit_returns() -> None:
    hub = EventHub()
    handled = list[TurnEvent]()

    async def observe(event: TurnEvent) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        handled.append(event)

    hub.subscribe(observe)
    for event in _events(3):
        await hub.emit(event)
        assert handled[-1] is event


async def test_a_stuck_observer_and_sink_neither_block_emit_nor_lose_events() -> None:
    release = asyncio.Event()

    stuck, sunk, quick = Arrivals(), Arrivals(), list[TurnEvent]()

    class StuckSink:
        async def emit(self, event: TurnEvent) -> None:
            await release.wait()
            sunk.add(event)

    async def observe(event: TurnEvent) -> None:
        await release.wait()
        stuck.add(event)

    hub = EventHub(StuckSink(), patience=0.01)
    hub.subscribe(observe)
    hub.subscribe(quick.append)
    events = _events(5)

    for event in events:
        await hub.emit(event)  # would hang here (until the test's timeout) if it waited
    assert quick == events
    assert (stuck.events, sunk.events) == ([], [])

    release.set()
    assert await stuck.until(lambda got: len(got) == len(events)) == events
    assert await sunk.until(lambda got: len(got) == len(events)) == events


async def test_a_stuck_observer_does_not_hold_up_a_turn() -> None:
    release = asyncio.Event()
    store = MemoryStore()
    stuck = Arrivals()

    async def observe(event: TurnEvent) -> None:
        await release.wait()
        stuck.add(event)

    async with _runtime(store, RecordingSink()) as rt:
        session = rt.session(AGENT, "s1")
        await session.observe(observe)
        result = await session.turn("How many mugs?", turn_id="t1")
        assert result.status == TurnStatus.COMPLETED
        assert stuck.events == []

        release.set()
        durable = await store.read_events("s1")
        got = await stuck.until(lambda got: bool(got) and got[-1].type == "turn.completed")
    _check_session(got, durable)


async def test_unsubscribing_stops_delivery_including_what_was_held() -> None:
    release = asyncio.Event()
    hub = EventHub(patience=0.01)
    seen = Arrivals()

    async def observe(event: TurnEvent) -> None:
        await release.wait()
        seen.add(event)

    unsubscribe = hub.subscribe(observe)
    events = _events(3)
    for event in events:
        await hub.emit(event)
    unsubscribe()
    unsubscribe()
    release.set()
    await hub.emit(_events(1)[0])
    await seen.until(lambda got: len(got) == 1)  # the one it was handling when it left
    for _ in range(10):
        await asyncio.sleep(0)  # room for anything else to arrive, if it (wrongly) would

    assert seen.events == events[:1]
