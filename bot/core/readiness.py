"""`/readyz`: whether this process can do its work now: the database answers and is at this
code's schema, and Redis answers where `REDIS_URL` is set.

`/healthz` says the process is alive (a restart would not help otherwise); readiness says
whether to send it traffic, so a database being migrated or a Redis being restarted takes the
process out of rotation instead of having it fail requests. Each check is bounded by `timeout`
so a probe never hangs on a dead host. What is not ready is named with a short reason, never a
URL, a host or a password.
"""

from __future__ import annotations

import asyncio

from agent import SessionStore
from agent.seams import SchemaMismatchError
from storage import SqlStore
from storage.redis.ping import RedisPing
from storage.sql.gauges import check_schema


class Readiness:
    def __init__(self, store: SessionStore, redis_url: str | None, *, timeout: float = 3.0) -> None:
        self._store = store
        self._redis_url = redis_url
        self._ping: RedisPing | None = None
        self.timeout = timeout

    async def problems(self) -> dict[str, str]:
        """What is not ready, by part (`database`, `redis`); empty when all is."""
        found: dict[str, str] = {}
        database = await self._database()
        if database is not None:
            found["database"] = database
        if self._redis_url:
            if self._ping is None:
                self._ping = RedisPing(self._redis_url, timeout=self.timeout)
            if not await self._ping.ping():
                found["redis"] = "unreachable"
        return found

    async def _database(self) -> str | None:
        if not isinstance(self._store, SqlStore):
            return None  # an in-memory store (a test's) is always there
        try:
            async with asyncio.timeout(self.timeout):
                await check_schema(self._store)
        except SchemaMismatchError:
            return "not at this code's schema (run `bot db upgrade`)"
        except Exception:  # unreachable, timed out: the reason may hold the host; not shown
            return "unreachable"
        return None

    async def close(self) -> None:
        if self._ping is not None:
            await self._ping.close()
            self._ping = None
