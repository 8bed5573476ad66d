"""`AgentSession`: the API a host uses for one conversation (a Slack thread, say)."""

from __future__ import annotations

import inspect
import uuid
from typing import TYPE_CHECKING

from agent.agent_def import Agent
from agent.errors import TurnInterruptedError
from agent.events import TurnEvent
from agent.messages import Message
from agent.seams import TurnStatus
from agent.sinks import Observer, Unsubscribe
from agent.turn_input import InboundEvent, TurnInput
from agent.turn_result import TurnResult

if TYPE_CHECKING:
    from agent.runtime import Runtime


class AgentSession:
    def __init__(self, runtime: Runtime, agent: Agent, key: str) -> None:
        self.runtime = runtime
        self.agent = agent
        self.key = key

    async def start(
        self, input: str | TurnInput | InboundEvent, *, turn_id: str | None = None
    ) -> str:
        """Queue the turn durably (committed before this returns) and hand it to a worker.

        Re-delivering a known turn id queues nothing new: a finished turn stays finished, an
        unfinished one is picked up where its checkpoints left it.
        """
        tid = turn_id or uuid.uuid4().hex
        record, _created = await self.runtime.store.enqueue_turn(
            self.key, tid, TurnInput.of(input)
        )
        if not record.status.finished:
            self.runtime.kick(self.key)
        return tid

    async def result(self, turn_id: str) -> TurnResult:
        """Wait until the turn completes, fails, is cancelled or parks (bound it with
        `asyncio.timeout` if needed)."""
        return await self.runtime.wait_turn(self.key, turn_id)

    async def turn(
        self,
        input: str | TurnInput | InboundEvent,
        *,
        turn_id: str | None = None,
    ) -> TurnResult:
        """Start and await. A turn that already finished returns its stored result, replayed."""
        if turn_id is not None:
            existing = await self.runtime.store.get_turn(self.key, turn_id)
            if existing is not None and existing.status.finished:
                return TurnResult.from_record(existing, replayed=True)
        tid = await self.start(input, turn_id=turn_id)
        result = await self.result(tid)
        if result.status == TurnStatus.SUSPENDED:
            raise TurnInterruptedError(
                f"turn {tid!r} parked waiting for input; use start()/result() to handle parking"
            )
        return result

    async def observe(
        self, callback: Observer, *, turn_id: str | None = None, replay: bool = False
    ) -> Unsubscribe:
        """Subscribe to live events; with `replay`, the durable log is delivered first.

        Live events that raced with the replay are de-duplicated by their `seq`.
        """
        if not replay:
            return self.runtime.hub.subscribe(callback, session=self.key, turn_id=turn_id)
        buffered: list[TurnEvent] = []
        replaying = True
        delivered_upto = 0

        async def gate(event: TurnEvent) -> None:
            if replaying:
                buffered.append(event)
            elif event.seq == 0 or event.seq > delivered_upto:
                await _call(callback, event)

        unsubscribe = self.runtime.hub.subscribe(gate, session=self.key, turn_id=turn_id)
        for event in await self.runtime.store.read_events(self.key):
            if turn_id is None or event.turn_id == turn_id:
                await _call(callback, event)
            delivered_upto = max(delivered_upto, event.seq)
        replaying = False
        for event in buffered:
            if event.seq == 0 or event.seq > delivered_upto:
                await _call(callback, event)
        return unsubscribe

    async def events(self, after_seq: int = 0) -> list[TurnEvent]:
        return await self.runtime.store.read_events(self.key, after_seq)

    async def transcript(self) -> list[Message]:
        return await self.runtime.store.load_transcript(self.key)


async def _call(callback: Observer, event: TurnEvent) -> None:
    outcome = callback(event)
    if inspect.isawaitable(outcome):
        await outcome
