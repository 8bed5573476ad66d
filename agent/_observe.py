"""`AgentSession.observe(replay=True)`: the durable log first, then live events, with nothing
missed and nothing delivered twice in between.

The live subscription opens before the log is read, so an event emitted during the replay is
held and delivered after it, unless the replay already delivered it (its `seq`); live deltas
(`seq` 0) are never in the log and always pass.
"""

from __future__ import annotations

import inspect

from agent._events import TurnEvent
from agent._sinks import EventHub, Observer, Unsubscribe
from agent.seams import StepLog


async def observe_replayed(
    hub: EventHub, store: StepLog, key: str, callback: Observer, turn_id: str | None
) -> Unsubscribe:
    buffered: list[TurnEvent] = []
    replaying = True
    delivered_upto = 0

    async def gate(event: TurnEvent) -> None:
        if replaying:
            buffered.append(event)
        elif event.seq == 0 or event.seq > delivered_upto:
            await _call(callback, event)

    unsubscribe = hub.subscribe(gate, session=key, turn_id=turn_id)
    for event in await store.read_events(key):
        if turn_id is None or event.turn_id == turn_id:
            await _call(callback, event)
        delivered_upto = max(delivered_upto, event.seq)
    replaying = False
    for event in buffered:
        if event.seq == 0 or event.seq > delivered_upto:
            await _call(callback, event)
    return unsubscribe


async def _call(callback: Observer, event: TurnEvent) -> None:
    outcome = callback(event)
    if inspect.isawaitable(outcome):
        await outcome
