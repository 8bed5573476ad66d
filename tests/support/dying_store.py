"""A store as a worker sees it that dies just before a given step commits: that commit never
returns (until the worker is torn down), so everything committed before it is what the next
worker finds. Cheaper than a SIGKILL for the engine-level crash tests that only need "the
process stopped here"; the subprocess suites kill real workers."""

from __future__ import annotations

import asyncio
from typing import Any

from agent import SessionStore


class DiesBeforeStep:
    """Wraps `inner`; the first commit of a step whose id starts with `prefix` hangs forever
    (`reached` is set when it does)."""

    def __init__(self, inner: SessionStore, prefix: str) -> None:
        self._inner = inner
        self._prefix = prefix
        self.reached = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def commit(self, lease: Any, commit: Any, ttl: float, now: float) -> Any:
        if commit.step_id is not None and commit.step_id.startswith(self._prefix):
            self.reached.set()
            await asyncio.Event().wait()
        return await self._inner.commit(lease, commit, ttl, now)
