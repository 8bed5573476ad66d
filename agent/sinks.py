"""Live event delivery. The hub fans a runtime's events out to in-process observers; a slow or
broken observer is logged and skipped, because a turn must never wait on, or fail because of,
someone watching it.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from agent.events import TurnEvent
from agent.seams import EventSink

log = logging.getLogger(__name__)

Observer = Callable[[TurnEvent], Awaitable[None] | None]
Unsubscribe = Callable[[], None]


@dataclass(frozen=True)
class _Subscription:
    callback: Observer
    session: str | None
    turn_id: str | None


class EventHub:
    """An `EventSink` that forwards each event to matching subscribers and an optional sink."""

    def __init__(self, downstream: EventSink | None = None) -> None:
        self._subs: list[_Subscription] = []
        self._downstream = downstream

    def subscribe(
        self, callback: Observer, *, session: str | None = None, turn_id: str | None = None
    ) -> Unsubscribe:
        sub = _Subscription(callback, session, turn_id)
        self._subs.append(sub)

        def unsubscribe() -> None:
            if sub in self._subs:
                self._subs.remove(sub)

        return unsubscribe

    async def emit(self, event: TurnEvent) -> None:
        for sub in list(self._subs):
            if sub.session is not None and sub.session != event.session:
                continue
            if sub.turn_id is not None and sub.turn_id != event.turn_id:
                continue
            await _deliver(sub.callback, event)
        if self._downstream is not None:
            try:
                await self._downstream.emit(event)
            except Exception:
                log.exception("event sink failed; the turn goes on")


async def _deliver(callback: Observer, event: TurnEvent) -> None:
    try:
        outcome = callback(event)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        log.exception("event observer failed; the turn goes on")


class RecordingSink:
    """Keeps every event it is given, for tests and the demo."""

    def __init__(self) -> None:
        self.events: list[TurnEvent] = []

    async def emit(self, event: TurnEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [e.type for e in self.events]
