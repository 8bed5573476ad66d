"""Live event delivery. The hub fans a runtime's events out to in-process observers and to the
host's sink; a broken one is logged and skipped, and a slow one is left behind, because a turn
must never fail because of, or wait long on, someone watching it.

A quick observer is awaited before `emit` returns, so one that reacts to an event (cancelling the
turn on a delta, say) is heard at the turn's next checkpoint. One that takes longer than the
hub's `patience` is not waited for any further: the turn goes on, and that observer gets this
event and every later one in order, as fast as it takes them, nothing dropped (held in memory
meanwhile: one stuck for good should unsubscribe). Once it has caught up it is awaited again.

Across processes, a hub connected to an `EventRelay` sends each event it emits to the other
processes, and `deliver`s theirs, for the sessions observed here, to its observers: a renderer
or `session.observe` sees a turn run elsewhere as it sees one run here.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

from agent._events import TurnEvent
from agent.seams import EventRelay, EventSink

log = logging.getLogger(__name__)

T = TypeVar("T")
Observer = Callable[[TurnEvent], Awaitable[None] | None]
Unsubscribe = Callable[[], None]

DEFAULT_PATIENCE = 2.0
"""Seconds a turn waits for one observer's handling of one event before it goes on without."""


class _Subscription:
    """One observer's place in the stream: the event it is busy with and the ones held for it."""

    def __init__(
        self,
        callback: Observer,
        session: str | None,
        turn_id: str | None,
        what: str,
        order: int = 0,
    ) -> None:
        self.order = order
        """When it subscribed: observers of one event are offered it in this order."""
        self.callback = callback
        self.session = session
        self.turn_id = turn_id
        self.what = what
        self.active = True
        self.busy: asyncio.Task[None] | None = None
        self.held: deque[tuple[TurnEvent, asyncio.Future[None]]] = deque()
        self.behind = False
        """Set when a turn gave up waiting on it; cleared once it has caught up."""

    def wants(self, event: TurnEvent) -> bool:
        return (self.session is None or self.session == event.session) and (
            self.turn_id is None or self.turn_id == event.turn_id
        )

    def offer(self, event: TurnEvent) -> asyncio.Future[None] | None:
        """Hand the event over, or hold it while an earlier one (another session's, say) is still
        being handled, so the order is kept per observer. Returns what to wait on for this
        event's handling: None when it is over already, or the observer was left behind."""
        if not self.active:
            return None
        if self.busy is not None:
            handled = asyncio.get_running_loop().create_future()
            self.held.append((event, handled))
            return None if self.behind else handled
        task = self._start(event)
        return None if self.behind else task

    def _start(self, event: TurnEvent) -> asyncio.Task[None] | None:
        try:
            outcome = self.callback(event)
        except Exception:
            log.exception("event %s failed; the turn goes on", self.what)
            return None
        if not inspect.isawaitable(outcome):
            return None
        task = asyncio.ensure_future(self._guarded(outcome))
        self.busy = task
        # Registered before anyone waits on the task, so it runs first: the observer is free
        # for the next event by the time the turn that waited goes on.
        task.add_done_callback(self._next)
        return task

    async def _guarded(self, outcome: Awaitable[None]) -> None:
        try:
            await outcome
        except Exception:
            log.exception("event %s failed; the turn goes on", self.what)

    def _next(self, _: asyncio.Task[None]) -> None:
        self.busy = None
        while self.held and self.busy is None:
            event, handled = self.held.popleft()
            task = self._start(event) if self.active else None
            if task is None:
                _settle(handled)
            else:
                task.add_done_callback(partial(_settle, handled))
        if not self.held:
            self.behind = False

    def close(self) -> None:
        self.active = False
        while self.held:
            _settle(self.held.popleft()[1])


def _settle(handled: asyncio.Future[None], _: object = None) -> None:
    if not handled.done():
        handled.set_result(None)


class EventHub:
    """An `EventSink` that forwards each event to matching subscribers and an optional sink.

    Each of them sees the events in the order they were emitted. `patience`: how long a turn
    waits on one of them (see the module docstring); the host's sink is treated alike.
    """

    def __init__(
        self, downstream: EventSink | None = None, *, patience: float = DEFAULT_PATIENCE
    ) -> None:
        self._everywhere: list[_Subscription] = []
        """Observers of every session."""
        self._by_session: dict[str, list[_Subscription]] = {}
        """Observers of one session each, by session: an event is matched against its own
        session's only. A renderer observes each thread it renders, so a web process in a
        burst holds thousands of these, and a scan of all of them on every event made each
        event's cost grow with the backlog (`bench.ack_latency --seconds 30`)."""
        self._subscribed = 0
        self._downstream = (
            _Subscription(downstream.emit, None, None, "sink") if downstream is not None else None
        )
        self._patience = patience
        self._relay: EventRelay | None = None
        self._watched: Counter[str] = Counter()
        """Subscriptions per session: what a relay is asked to bring here."""

    def connect(self, relay: EventRelay | None) -> None:
        """Send this hub's events to other processes through `relay`, and take theirs for the
        sessions observed here (now and later); None disconnects."""
        previous, self._relay = self._relay, relay
        for session in self._watched:
            if previous is not None:
                _tell(previous.unwatch, session)
            if relay is not None:
                _tell(relay.watch, session)

    def subscribe(
        self, callback: Observer, *, session: str | None = None, turn_id: str | None = None
    ) -> Unsubscribe:
        """Observe the events emitted here, and, for a `session`, those a connected relay brings
        from other processes (an observer of every session gets only the latter of watched
        sessions)."""
        self._subscribed += 1
        sub = _Subscription(callback, session, turn_id, "observer", self._subscribed)
        if session is None:
            self._everywhere.append(sub)
        else:
            self._by_session.setdefault(session, []).append(sub)
            self._watched[session] += 1
            if self._watched[session] == 1 and self._relay is not None:
                _tell(self._relay.watch, session)

        def unsubscribe() -> None:
            sub.close()
            if session is None:
                if sub in self._everywhere:
                    self._everywhere.remove(sub)
                return
            subs = self._by_session.get(session, [])
            if sub in subs:
                subs.remove(sub)
                if not subs:
                    del self._by_session[session]
                self._forget(session)

        return unsubscribe

    def _matching(self, event: TurnEvent) -> list[_Subscription]:
        """The observers that want `event`, in the order they subscribed."""
        scoped = [sub for sub in self._by_session.get(event.session, ()) if sub.wants(event)]
        if not self._everywhere:
            return scoped
        subs = [sub for sub in self._everywhere if sub.wants(event)] + scoped
        subs.sort(key=lambda sub: sub.order)
        return subs

    def _forget(self, session: str) -> None:
        self._watched[session] -= 1
        if self._watched[session] <= 0:
            del self._watched[session]
            if self._relay is not None:
                _tell(self._relay.unwatch, session)

    def deliver(self, event: TurnEvent) -> None:
        """An event another process emitted (a relay calls this): offered to the matching
        observers, in order with the rest, without waiting for them, since no turn of this
        process waits on it. It goes no further: not back to the relay, and not to the host's
        sink, which gets this process's own events only."""
        for sub in self._matching(event):
            sub.offer(event)

    async def emit(self, event: TurnEvent) -> None:
        if self._relay is not None:
            _tell(self._relay.publish, event)
        targets = self._matching(event)
        if self._downstream is not None:
            targets.append(self._downstream)
        handling: dict[asyncio.Future[None], _Subscription] = {}
        for sub in targets:
            pending = sub.offer(event)
            if pending is not None:
                handling[pending] = sub
        if not handling:
            return
        _, late = await asyncio.wait(handling, timeout=self._patience)
        for pending in late:
            handling[pending].behind = True
        if late:
            log.warning(
                "%d event observer(s) took over %gs on a %s event; the turn goes on without "
                "waiting for them, and they get every event in order as they catch up",
                len(late),
                self._patience,
                event.type,
            )


def _tell(send: Callable[[T], None], what: T) -> None:
    """A relay must not raise; one that does is logged, and the turn goes on."""
    try:
        send(what)
    except Exception:
        log.exception("the event relay failed; live events may not reach other processes")


class RecordingSink:
    """Keeps every event it is given, for tests and the demo."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def emit(self, event: TurnEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]
