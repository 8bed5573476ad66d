"""Channels: how a surface (Slack, a CLI) renders a turn, and agent-initiated turns.

`receive` starts a proactive turn, one with no inbound message, and renders it through the
channel's own `deliver()`, the same renderer an inbound reply uses. It raises rather than drop the
turn when the host cannot stream or the channel cannot deliver.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from agent._agent_def import Agent
from agent._answerers import AnswererInput
from agent._errors import AgentError, ToolError
from agent._events import TERMINAL_EVENT_TYPES, TurnEvent
from agent._hitl import WORKSPACE_KEYS, answerers_of
from agent._turn_input import Trigger, TurnInput

if TYPE_CHECKING:
    from agent._runtime import Runtime


class Channel(Protocol):
    async def deliver(self, target: Mapping[str, Any], events: AsyncIterator[TurnEvent]) -> None:
        """Render a turn's events to `target` (a channel id, a thread) until the stream ends."""
        ...


class TurnStreamer(Protocol):
    def run_stream(
        self, input: TurnInput, *, session: str, turn_id: str | None = None
    ) -> AsyncIterator[TurnEvent]:
        """Start (or re-deliver) the turn and yield its events until a terminal one."""
        ...


class ChannelContext:
    """What a channel needs from the host: a way to run a turn and stream its events."""

    def __init__(self, runtime: Runtime, agent: Agent) -> None:
        self.runtime = runtime
        self.agent = agent

    async def run_stream(
        self, input: TurnInput, *, session: str, turn_id: str | None = None
    ) -> AsyncIterator[TurnEvent]:
        """Start (or re-deliver) the turn and yield its events, durable log first, until a
        terminal event (completed, failed, cancelled, or parked for input)."""
        agent_session = self.runtime.session(self.agent, session)
        queue: asyncio.Queue[TurnEvent] = asyncio.Queue()
        tid = await agent_session.start(input, turn_id=turn_id)
        unsubscribe = await agent_session.observe(queue.put_nowait, turn_id=tid, replay=True)
        try:
            while True:
                event = await queue.get()
                yield event
                if event.type in TERMINAL_EVENT_TYPES:
                    return
        finally:
            unsubscribe()


async def receive(
    channel: Channel,
    ctx: TurnStreamer,
    *,
    seed: str,
    target: Mapping[str, Any],
    trigger: Mapping[str, str],
    session: str,
    turn_id: str | None = None,
    answerers: AnswererInput | None = None,
) -> str:
    """Start a proactive turn and render it. The seed is stored as a `trigger` message
    attributed to `trigger["by"]`, so the transcript records that no human sent it. A
    caller-supplied `turn_id` makes the trigger idempotent (a clock fires once per slot).

    `answerers`: who may answer what the turn asks; without them it cannot park (nobody spoke,
    so there is no speaker to default to); a typed answerer or its dict, and a malformed one
    is an `AgentError` before anything starts. The target's `team` / `enterprise` are the
    workspace answers must come from."""
    run_stream = getattr(ctx, "run_stream", None)
    if run_stream is None:
        raise AgentError("receive: the host cannot stream turns (no run_stream); turn not started")
    deliver = getattr(channel, "deliver", None)
    if deliver is None:
        raise AgentError("receive: the channel has no deliver(); turn not started")
    try:
        chosen = answerers_of(answerers)
    except ToolError as err:
        raise AgentError(f"receive: {err}; turn not started") from None
    turn_input = TurnInput(
        text=seed,
        trigger=Trigger(
            kind=trigger.get("kind", "proactive"),
            by=trigger["by"],
            answerers=chosen,
            context={k: str(target[k]) for k in WORKSPACE_KEYS if target.get(k)},
        ),
    )
    tid = turn_id or uuid.uuid4().hex
    await deliver(target, run_stream(turn_input, session=session, turn_id=tid))
    return tid
