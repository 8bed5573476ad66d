"""What a session handle stands on (`SessionRuntime`, which `agent._runtime.Runtime` is) and
what the modules that answer and stop on its behalf need of it (`SessionHandle`, which
`AgentSession` is): typed here, apart from both, so those modules import neither."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from agent._agent_def import Agent
from agent._redaction import Redactor
from agent._sinks import EventHub
from agent._turn_result import TurnResult
from agent.seams import SessionStore


class SessionRuntime(Protocol):
    """What a session handle needs of its runtime (`agent._runtime.Runtime` has it): the store,
    the event hub, the clock, and the calls that start, stop and wait for the session's turns."""

    @property
    def store(self) -> SessionStore: ...

    @property
    def hub(self) -> EventHub: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def redact(self) -> Redactor: ...

    def kick(self, key: str) -> None: ...

    def signal_cancel(
        self, key: str, reason: str, *, keep: str | None = None, only: str | None = None
    ) -> None: ...

    def note_replay(self, key: str, turn_id: str) -> None: ...

    async def wait_turn(self, key: str, turn_id: str) -> TurnResult: ...


class SessionHandle(Protocol):
    """One session of one agent on a runtime (`agent.AgentSession`)."""

    @property
    def runtime(self) -> SessionRuntime: ...

    @property
    def agent(self) -> Agent: ...

    @property
    def key(self) -> str: ...
