"""Riding out a database outage: retries that back off, and one log line each way.

While the database is away every background loop of a runtime (the recovery sweep, each lease's
heartbeat, each drain waiting to go on with its turn) keeps failing. Logged per attempt, that is
a traceback every few hundred milliseconds per session, burying the one fact an operator needs;
so the runtime shares one `OutageLog`, which says "database unavailable, retrying" when the first
call fails and "database reachable again" when one succeeds after that.

Reads and writes are told apart because they can fail apart: on SQLite another process holding
the write lock past the busy timeout fails every write while reads go on (WAL). A read that
succeeds does not end an outage that writes are still in, or the two lines would alternate for
as long as it lasts; a write that succeeds ends any (its transaction read too).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterator
from typing import Protocol

from agent._errors import LeaseLostError, StoreUnavailableError
from agent._records import Lease
from agent._store_seam import SessionStore

log = logging.getLogger("agent._runtime")


class OutageLog:
    """Whether the store was last seen unreachable, logging only the changes."""

    def __init__(self) -> None:
        self._reads_failing = False
        self._writes_failing = False

    @property
    def down(self) -> bool:
        return self._reads_failing or self._writes_failing

    def failed(self, error: StoreUnavailableError, *, writing: bool) -> None:
        """A store call failed because the database could not be reached."""
        was_down = self.down
        if writing:
            self._writes_failing = True
        else:
            self._reads_failing = True
        if not was_down:
            log.warning("database unavailable, retrying: %s", error)

    def reached(self, *, writing: bool) -> None:
        """A store call succeeded (`writing`: in a write transaction)."""
        was_down = self.down
        self._reads_failing = False
        if writing:
            self._writes_failing = False
        if was_down and not self.down:
            log.warning("database reachable again")


def backoff(first: float, most: float) -> Iterator[float]:
    """Delays between retries: doubling from `first` up to `most`, each jittered down by up to
    half, so that the workers of a fleet do not all retry in step when the database returns."""
    delay = first
    while True:
        yield delay * random.uniform(0.5, 1.0)
        delay = min(delay * 2, most)


class Renewing(Protocol):
    """What renewing a lease through an outage needs of the runtime."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def outage(self) -> OutageLog: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def lease_ttl(self) -> float: ...

    @property
    def poll_interval(self) -> float: ...

    @property
    def recovery_interval(self) -> float: ...


async def renew_when_reachable(
    runtime: Renewing, lease: Lease, error: StoreUnavailableError, *, closed: Callable[[], bool]
) -> None:
    """Retry renewing `lease`, backing off, until the database answers; raises
    `LeaseLostError` if it answers that the lease moved, and `error` if the runtime closes
    first."""
    for delay in backoff(runtime.poll_interval, runtime.recovery_interval):
        if closed():
            raise error
        await asyncio.sleep(delay)
        try:
            renewed = await runtime.store.renew_lease(lease, runtime.lease_ttl, runtime.clock())
        except StoreUnavailableError as err:
            runtime.outage.failed(err, writing=True)
            error = err
            continue
        runtime.outage.reached(writing=True)
        if not renewed:
            raise LeaseLostError(
                f"lease on session {lease.session!r} (epoch {lease.epoch}) was taken over "
                "while the database was unavailable"
            )
        return
