"""The seams of live events and of work between processes: `EventSink` (what the engine shows
live), `Dispatcher` (telling other processes what was queued or cancelled) and `EventRelay`
(live events from and to other processes), with the sides of a runtime they plug into."""

from __future__ import annotations

from typing import Protocol

from agent._events import TurnEvent
from agent._store_seam import SessionStore


class EventSink(Protocol):
    """Where a runtime's live events go (`tests/contract/test_event_sink.py` holds the contract).

    What the engine sends: per session, events in commit order; durable ones numbered as in the
    session's log, each sent once, right after its commit; deltas with seq 0, only inside their
    model step; nothing for a finished turn delivered again. Delivery is live only: what a sink
    missed is read back from the log (`SessionStore.read_events`), never sent twice.
    """

    async def emit(self, event: TurnEvent) -> None:
        """Take one event, in the order given, and never raise into the turn.

        The runtime puts its `EventHub` in front of a host's sink, which waits on a slow sink only
        so long (its `patience`); a sink should still hand slow work off rather than do it here.
        """
        ...


# -- news between processes ------------------------------------------------------------------
# Implemented outside `agent` (`storage.redis.dispatch`, `storage.redis.events`), which is why
# they are seams here: those implementations import only this module and the types beside it.


class Dispatcher(Protocol):
    """Cross-process news: which session has work, which turn should stop. Only a speed-up
    over polling the database, never the record, so losing it loses nothing."""

    async def queued(self, session: str) -> None:
        """Tell some worker that `session` has a turn to run."""
        ...

    async def cancel(
        self, session: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """Tell every worker to signal the session's running turn (see `signal_cancel_here`)."""
        ...


class DispatchTarget(Protocol):
    """What a dispatcher's consumer hands news to: a worker's `Runtime`."""

    @property
    def owner(self) -> str:
        """This worker's name (a dispatcher's consumer name)."""
        ...

    def kick(self, key: str) -> None:
        """Make sure a drain runs for `key`."""
        ...

    def signal_cancel_here(
        self, key: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None:
        """Stop the session's running turn here at its next checkpoint."""
        ...


class EventRelay(Protocol):
    """Live events to and from other processes (`storage.redis.events.RedisEventRelay`).

    Only ever a speed-up: what is durable is in the session's log, and a live delta lost costs
    only its early display, so a relay may drop events. It must never block or fail a turn.
    """

    def publish(self, event: TurnEvent) -> None:
        """Send an event this process emitted to the others; returns at once, never raises."""
        ...

    def watch(self, session: str) -> None:
        """`session` has its first observer here: deliver other processes' events of it."""
        ...

    def unwatch(self, session: str) -> None:
        """`session`'s last observer here left: its events need not come here any more."""
        ...


class RelayHub(Protocol):
    """The side of a runtime's event hub a relay plugs into (`agent._sinks.EventHub`)."""

    def connect(self, relay: EventRelay | None) -> None:
        """Send this process's events to `relay` (None: stop)."""
        ...

    def deliver(self, event: TurnEvent) -> None:
        """Hand another process's event to this process's subscribers of its session."""
        ...


class RelayHost(Protocol):
    """What a relay attaches to: a `Runtime`, its hub and its store."""

    @property
    def hub(self) -> RelayHub: ...

    @property
    def store(self) -> SessionStore: ...
