"""Waiting for a turn to end or park: `Runtime.wait_turn`, and with it `AgentSession.result`.

A waiter polls the store, so another process's work counts, and is woken at once when a drain
of its session ends in this process. Per session: with one shared wake-up, every turn's end made
every waiter of every session read its turn again, reads that grow with the square of the
sessions waited on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from agent._errors import TurnNotFoundError
from agent._turn_result import TurnResult
from agent.seams import TurnQueue, TurnStatus


class _Watch:
    """What the waiters of one session sleep on, and how many there are."""

    __slots__ = ("event", "waiters")

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.waiters = 0


class TurnWaits:
    def __init__(self) -> None:
        self._changed: dict[str, _Watch] = {}

    async def wait(
        self,
        store: TurnQueue,
        key: str,
        turn_id: str,
        *,
        poll: float,
        replayed: Callable[[str, str], bool],
    ) -> TurnResult:
        """The turn once it ends or parks; `replayed` says whether this delivery of a finished
        turn was a re-delivery (`Runtime.note_replay`)."""
        while True:
            watch = self._changed.get(key)
            if watch is None:
                watch = self._changed[key] = _Watch()
            watch.waiters += 1
            try:
                record = await store.get_turn(key, turn_id)
                if record is None:
                    raise TurnNotFoundError(f"no turn {turn_id!r} on session {key!r}")
                if record.status.finished or record.status == TurnStatus.SUSPENDED:
                    again = record.status.finished and replayed(key, turn_id)
                    return TurnResult.from_record(record, replayed=again)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(poll):  # wait_for may swallow a cancel on 3.11
                        await watch.event.wait()
            finally:
                watch.waiters -= 1
                if not watch.waiters and self._changed.get(key) is watch:
                    del self._changed[key]

    def notify(self, key: str) -> None:
        """Wake the waiters of session `key` to read their turn again."""
        watch = self._changed.pop(key, None)
        if watch is not None:
            watch.event.set()
