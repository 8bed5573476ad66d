"""The engine side: real turns through `Runtime` + `SqlStore` + a zero-latency `ScriptedModel`.

A step's time is read off the hub: durable events are emitted right after their commit, and every
commit of this workload emits exactly one of `turn.started`, `message.completed` or
`action.completed` first. The span from the opening commit to the final one therefore holds every
model and tool step and nothing that happens once per turn (queueing, the lease, the transcript
load), which is reported apart as the whole-turn cost.
"""

from __future__ import annotations

import asyncio
import time
import uuid

from sqlalchemy import text
from sqlalchemy.engine import Connection

from agent import Runtime, ScriptedModel, TurnEvent, TurnInput, TurnStatus
from bench.raw_floor import FOOTPRINT, SYNCHRONOUS_NAMES
from bench.timing import TurnTiming, from_marks
from bench.workload import BENCH_AGENT, OPENING_TEXT, responder, steps_per_turn
from storage import SqlStore

STEP_MARKERS = frozenset({"turn.started", "message.completed", "action.completed"})
"""The first durable event of each commit in this workload (see `workload.turn_commits`)."""

POSTGRES_DURABILITY = ("fsync", "synchronous_commit", "wal_sync_method")


class EngineBench:
    """One runtime for the whole run, as a worker process would have; a fresh session per turn."""

    def __init__(self, store: SqlStore, calls: int) -> None:
        self.store = store
        self.calls = calls
        # The scripted model logs every request for tests to inspect, and each request holds a
        # tuple of the whole transcript: kept for a turn, that is O(transcript) memory per step
        # for the garbage collector to walk, which no production model adapter does.
        self.model = ScriptedModel(responder=responder(calls), keep_requests=False)
        # No recovery sweeper: nothing here needs recovering, and its polling would be noise.
        self.runtime = Runtime(store, self.model, agent=BENCH_AGENT)

    @classmethod
    async def open(cls, url: str, calls: int) -> EngineBench:
        return cls(await SqlStore.open(url), calls)

    async def close(self) -> None:
        await self.runtime.close()
        await self.store.close()

    async def run_turn(self, key: str) -> tuple[TurnTiming, str]:
        """Run one turn on a fresh, pre-populated session; returns its timing and turn id."""
        marks: list[int] = []

        def on_event(event: TurnEvent) -> None:
            if event.type in STEP_MARKERS:
                marks.append(time.perf_counter_ns())

        unsubscribe = self.runtime.hub.subscribe(on_event, session=key)
        try:
            self.runtime.session(BENCH_AGENT, key)
            started = time.perf_counter_ns()
            # What `AgentSession.start` + `result` do for a plain new turn, spelled out with the
            # store's and runtime's own calls so it runs whatever options `start` grows.
            turn_id = uuid.uuid4().hex
            await self.store.enqueue_turn(key, turn_id, TurnInput(text=OPENING_TEXT))
            self.runtime.kick(key)
            result = await self.runtime.wait_turn(key, turn_id)
            ended = time.perf_counter_ns()
        finally:
            unsubscribe()
        if result.status != TurnStatus.COMPLETED:
            raise RuntimeError(f"benchmark turn on {key!r} ended {result.status}: {result.error}")
        if len(marks) != steps_per_turn(self.calls):
            raise RuntimeError(
                f"expected {steps_per_turn(self.calls)} commits on {key!r}, saw {len(marks)}"
            )
        await self._wait_released(key)
        return from_marks(marks, started, ended), result.turn_id

    async def _wait_released(self, key: str) -> None:
        """Let the drain finish releasing the lease, so its tail does not land in the next turn."""
        for _ in range(1000):
            record = await self.store.get_session(key)
            if record is None or record.lease_owner is None:
                return
            await asyncio.sleep(0.001)
        raise RuntimeError(f"the runtime never released the lease on {key!r}")

    async def durability(self) -> str:
        """The engine connection's own durability settings, read through the store itself."""
        return await self.store.run_sync(_durability)

    async def footprint(self, key: str, turn_id: str) -> tuple[int, int]:
        """(rows, body characters) the turn wrote, to check the floor wrote the same."""

        def count(conn: Connection) -> tuple[int, int]:
            row = conn.execute(text(FOOTPRINT), {"session": key, "turn": turn_id}).one()
            return int(row[0]), int(row[1])

        return await self.store.run_sync(count)


def _durability(conn: Connection) -> str:
    if conn.dialect.name == "sqlite":
        mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()
        sync = conn.exec_driver_sql("PRAGMA synchronous").scalar_one()
        return f"journal_mode={mode} synchronous={SYNCHRONOUS_NAMES.get(sync, sync)}"
    shown = [
        f"{name}={conn.execute(text(f'SHOW {name}')).scalar_one()}" for name in POSTGRES_DURABILITY
    ]
    return " ".join(shown)
