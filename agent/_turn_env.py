"""What a turn runs against, in a module of its own so that the turn loop and the parts it hands
work to (tool steps, effects) can all name it without importing one another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from agent._agent_def import Agent
from agent._tool_values import SHAPES_ONLY
from agent._turn_metering import TurnWatch, quiet_watch
from agent.seams import EventSink, Lease, Model, SessionStore

DEFAULT_TOOL_CONCURRENCY: Final = 4
"""Calls of one batch running at once, unless the host says otherwise. Four because a model
reply that asks for several tools mostly asks for a few, and remote calls mostly wait on someone
else's server: four side by side cost about one call's wait instead of four
(`bench.parallel_tools`: 212-238 ms of tool time, not 850), while a reply that asks for dozens
still reaches a provider, and the store (each finished call commits its own step), a few at a
time. A tool whose calls must never overlap (one account's balance, a rate-limited API) opts out
itself with `@tool(concurrency=1)`; `tool_concurrency=1` runs every call one after another."""


@dataclass(kw_only=True)
class TurnEnv:
    """Built by the runtime for each lease it holds."""

    agent: Agent
    store: SessionStore
    model: Model
    sink: EventSink
    lease: Lease
    ttl: float
    clock: Callable[[], float]
    redact: Callable[[str], str] = SHAPES_ONLY
    """Scrubs secrets from every error text before it is stored, emitted or shown to the model."""
    tool_concurrency: int = DEFAULT_TOOL_CONCURRENCY
    """How many calls of one model reply's batch run at once (`agent._tool_batch`)."""
    watch: TurnWatch = field(default_factory=quiet_watch)
    """What this run reports to the host's meter and tracer (`agent._turn_metering`)."""
