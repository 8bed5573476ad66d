"""The gauges a scrape reads from the database: parked requests, uncertain receipts, queued
turns, and whether the database answered at all.

Prometheus collects synchronously, and a query must not block the event loop, so a scrape
first awaits `refresh()` (the queries run on the store's executor, `storage.sql.gauges`) and
then collects the snapshot it left. A snapshot younger than `ttl` is reused, and concurrent
scrapes share one refresh, so a scrape storm costs the database one query set per `ttl`. A
database that is down or slow (past `timeout`) makes `bot_database_up` 0 and the backlog gauges
absent: never an error page, never a stale number shown as current.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from agent import SessionStore
from storage import SqlStore
from storage.sql.gauges import StoreGauges, store_gauges

log = logging.getLogger(__name__)


class StoreGaugeCollector(Collector):
    def __init__(
        self,
        store: SessionStore,
        *,
        ttl: float = 2.0,
        timeout: float = 3.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store if isinstance(store, SqlStore) else None
        self.ttl, self.timeout = ttl, timeout
        self._clock = clock
        self._snapshot: StoreGauges | None = None
        self._up: bool | None = None
        self._read_at = float("-inf")
        self._lock = asyncio.Lock()
        self.reads = 0
        """Query sets run (the cache's test reads it)."""

    async def refresh(self) -> None:
        """Read the gauges unless a recent read stands; never raises."""
        if self._store is None:
            return
        async with self._lock:
            if self._clock() - self._read_at < self.ttl:
                return
            self.reads += 1
            try:
                async with asyncio.timeout(self.timeout):
                    self._snapshot, self._up = await store_gauges(self._store), True
            except Exception as err:  # unreachable, timed out, a driver error: all "down"
                log.debug("metrics could not read the database (%s)", type(err).__name__)
                self._snapshot, self._up = None, False
            self._read_at = self._clock()

    def collect(self) -> Iterable[Metric]:
        if self._up is None:
            return
        yield GaugeMetricFamily(
            "bot_database_up", "1 when the last scrape's queries answered.", value=int(self._up)
        )
        g = self._snapshot
        if g is None:
            return
        for name, doc, value in (
            ("bot_parked_requests", "Approval requests waiting for an answer.", g.parked_requests),
            (
                "bot_parked_request_oldest_age_seconds",
                "Age of the oldest approval request still waiting (0: none).",
                g.age(g.oldest_parked_at),
            ),
            (
                "bot_parked_sessions",
                "Sessions whose turn is parked on a question to a person.",
                g.parked_sessions,
            ),
            (
                "bot_parked_session_oldest_age_seconds",
                "How long the longest-parked session has waited (0: none).",
                g.age(g.oldest_session_parked_at),
            ),
            (
                "bot_uncertain_receipts",
                "Effects that may or may not have happened, waiting for a person.",
                g.uncertain_receipts,
            ),
            ("bot_queued_turns", "Turns queued and not yet claimed.", g.queued_turns),
            (
                "bot_queued_turn_oldest_age_seconds",
                "Age of the oldest queued turn (0: none).",
                g.age(g.oldest_queued_at),
            ),
        ):
            yield GaugeMetricFamily(name, doc, value=value)
