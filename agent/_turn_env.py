"""What a turn runs against, in a module of its own so that the turn loop and the parts it hands
work to (tool steps, effects) can all name it without importing one another."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from agent._agent_def import Agent
from agent._tool_values import SHAPES_ONLY
from agent.seams import EventSink, Lease, Model, SessionStore

DEFAULT_TOOL_CONCURRENCY: Final = 1
"""Calls of one batch running at once, unless the host says otherwise: one after another for
now. Side by side (`tool_concurrency` above 1) is built and tested at the engine; the bot's own
tests still assume a batch's calls run in order (a Stop during the first leaves the second
unrun), so the default moves to 4 once they are rewritten for calls that run together."""


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
    tool_concurrency: int = DEFAULT_TOOL_CONCURRENCY
    """How many calls of one model reply's batch run at once (`agent._tool_batch`)."""
    """Scrubs secrets from every error text before it is stored, emitted or shown to the model."""
