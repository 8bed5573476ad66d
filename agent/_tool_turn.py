"""What running a turn's tool calls needs of the turn, apart from the runner that needs it, so
`agent._tool_steps` depends on a shape, not on `agent._turn_loop` (which imports the runner)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from agent._messages import JsonValue, Message
from agent._policy import TurnPolicy
from agent._signals import CancellationSignal
from agent._turn_env import TurnEnv
from agent.seams import StepCommit, TurnRecord


class ToolTurn(Protocol):
    """What running a turn's tool calls needs of the turn (`agent._turn_loop.TurnRunner` has it):
    its identity and environment, what it has done so far, and how to commit the next step."""

    @property
    def env(self) -> TurnEnv: ...

    @property
    def turn(self) -> TurnRecord: ...

    @property
    def session(self) -> str: ...

    @property
    def turn_id(self) -> str: ...

    @property
    def steps(self) -> dict[str, JsonValue]: ...

    @property
    def policy(self) -> TurnPolicy: ...

    @property
    def cancellation(self) -> CancellationSignal: ...

    @property
    def next_index(self) -> int: ...

    def turn_messages(self) -> list[Message]: ...

    def checkpoint(self) -> None:
        """Where a requested cancellation takes effect: raises `CancelTurn` once asked."""

    def parked_call_ids(self) -> set[str]: ...

    async def commit(self, commit: StepCommit) -> None: ...

    async def run_local(
        self, run: Callable[[Any], Any], build: Callable[[Any], StepCommit]
    ) -> None: ...
