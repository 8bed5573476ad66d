"""The delivery lease a renderer holds on its session, and the fence every Slack call passes.

One process at a time renders a thread (`DeliveryStore.acquire`). Holding the lease is not
enough between calls: a call made after the lease lapsed could land while another process has
started rendering the same thread, and both would post. So before every Slack call the renderer
asks `fence()`, which renews the lease once a third of its ttl has passed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from storage.delivery.store import DeliveryStore


@dataclass(frozen=True, kw_only=True)
class RenderSettings:
    stream_max_age: float = 270.0
    flush_interval: float = 1.0
    flush_chars: int = 400
    poll_interval: float = 1.0
    lease_ttl: float = 30.0
    backoff_base: float = 1.0
    """After a session's rendering stopped on an error, the first wait before it is tried again
    (doubled at each failure in a row; `bot.slack.rendering.backoff`)."""
    backoff_cap: float = 300.0


class LeaseLost(Exception):
    """Another process took over rendering this session."""


class DeliveryLease:
    def __init__(
        self,
        delivery: DeliveryStore,
        *,
        key: str,
        owner: str,
        ttl: float,
        leased_at: float | None,
    ) -> None:
        """`leased_at`: when (`time.monotonic()`, taken before the write) the caller acquired
        the lease; None: the caller holds no lease (a one-off notice), and nothing is fenced."""
        self.delivery = delivery
        self.key = key
        self.owner = owner
        self.ttl = ttl
        self._fenced = leased_at is not None
        self._renewed = leased_at if leased_at is not None else 0.0

    async def renew(self) -> None:
        """Keep the lease: renewed once a third of its ttl has passed since the last renewal,
        timed from before that renewal's write (so this process never believes in more lease
        than it has). Raises `LeaseLost` when another process holds it."""
        began = time.monotonic()
        if began - self._renewed < self.ttl / 3:
            return
        if not await self.delivery.acquire(self.key, self.owner, self.ttl, time.time()):
            raise LeaseLost(self.key)
        self._renewed = began

    async def fence(self) -> None:
        """Before every Slack call: the lease is still ours, with at least two thirds of its ttl
        left, so no other process can start rendering this thread before the call lands.

        Renewing only between batches was not enough: a batch that took longer than the ttl (a
        long catch-up after a restart, a slow Slack, a starved machine) outlived the lease, the
        next worker's sweep took the thread over, and both rendered it at once: replies posted
        twice, messages closed at stale bodies."""
        if self._fenced:
            await self.renew()
