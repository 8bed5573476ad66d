"""How long a session's rendering waits after Slack refused or failed it, and what is logged.

A renderer that stops on a Slack error (or any other) is not started again at once: the sweep
used to take the session up again within a couple of seconds, and a thread Slack no longer has
(`thread_not_found` on `conversations.replies`) was asked for about 1.4 times a second, hours on
end, far past the method's rate limit. Each failure of a session doubles its wait, from `base`
up to `cap`; a render that ends well forgets them.

The wait holds across processes: the failing process keeps the session's delivery lease through
the wait and a lease's length past it (`RendererPool`), so no other worker's sweep takes the
thread up meanwhile, and the next try is this process's own, counted here. Only if it dies does
another worker take the session up, once the lease has lapsed, counting from one again.

Each session's error is logged once (its first occurrence, at warning), not at every retry;
the next ones are logged at debug until the session renders again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Wait:
    failures: int
    until: float
    """`clock()` time the session may be tried again."""
    code: str


class Backoff:
    def __init__(
        self, *, base: float, cap: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.base = base
        self.cap = cap
        self.clock = clock
        self._waits: dict[str, Wait] = {}
        self._said: dict[str, set[str]] = {}

    def failed(self, key: str, code: str) -> float:
        """Count a failure of `key`; returns the seconds to wait before the next try."""
        previous = self._waits.get(key)
        failures = (previous.failures if previous else 0) + 1
        delay = float(min(self.base * 2.0 ** (failures - 1), self.cap))
        self._waits[key] = Wait(failures=failures, until=self.clock() + delay, code=code)
        return delay

    def left(self, key: str) -> float:
        """Seconds `key` still waits (0: it may be tried now)."""
        wait = self._waits.get(key)
        return 0.0 if wait is None else max(wait.until - self.clock(), 0.0)

    def first_time(self, key: str, code: str) -> bool:
        """True the first time `key` fails with `code` since it last rendered well: log it."""
        said = self._said.setdefault(key, set())
        if code in said:
            return False
        said.add(code)
        return True

    def succeeded(self, key: str) -> None:
        self._waits.pop(key, None)
        self._said.pop(key, None)

    def failures(self, key: str) -> int:
        wait = self._waits.get(key)
        return wait.failures if wait else 0
