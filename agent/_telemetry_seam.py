"""`TurnMeter`: what the engine tells a host about the work it did, as it does it.

The engine counts nothing itself: it hands a frozen record to a meter at each moment a host
would chart (a turn ended, a model call returned, a tool call settled, a step committed, a lease
was taken over), and a host turns them into Prometheus series, log lines or anything else.
A meter is called on the event loop, synchronously, after the fact it reports is durable; it
must not block and must not raise (the engine shields itself from one that does, so a broken
meter costs its own numbers, never a turn).

Records carry no content: no prompt, no tool argument, no result, no secret. Labels a meter
builds from them (model, tool, outcome) come from the agent's own declarations, so their count
is bounded by the deployment, not by users.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

TurnOutcome = Literal["completed", "suspended", "failed", "cancelled"]
"""How a run of a turn ended: `suspended` is a park (the turn resumes later as a new run)."""

ToolOutcome = Literal["ok", "error", "denied", "parked", "deduplicated"]
"""How one tool call settled: `denied` by a person or policy, `parked` waiting for one,
`deduplicated` answered by an earlier receipt instead of running again."""

StepKind = Literal["model", "tool", "opening", "end"]


@dataclass(frozen=True, kw_only=True, slots=True)
class TokenCounts:
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnRun:
    """One run of a turn, from claiming it to its end or its park."""

    agent: str
    session_key: str
    turn_id: str
    outcome: TurnOutcome
    seconds: float
    steps: int
    tokens: TokenCounts
    trace_id: str | None = None
    """The turn's trace (32 hex digits) when tracing derives one, so a log line links to it."""
    error: str | None = None
    """For `failed`: the failure's kind (an exception class name), never its text."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelRun:
    agent: str
    model: str
    seconds: float
    tokens: TokenCounts
    stop_reason: str | None
    error: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolRun:
    agent: str
    tool: str
    outcome: ToolOutcome
    seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class StepCommitted:
    agent: str
    kind: StepKind
    seconds: float
    """From the step's start to its commit returning: the work and the durable write."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LeaseTakeover:
    """A worker claimed a session whose lease another owner had let lapse (a crash, a stall)."""

    session_key: str


class TurnMeter(Protocol):
    """Receives the engine's records. Every method returns at once and never raises."""

    def turn_ran(self, record: TurnRun) -> None:
        """A run of a turn ended (completed, failed, cancelled) or parked (suspended)."""

    def model_called(self, record: ModelRun) -> None:
        """A model call returned its final message, or failed."""

    def tool_called(self, record: ToolRun) -> None:
        """A tool call settled, however it did."""

    def step_committed(self, record: StepCommitted) -> None:
        """A step's checkpoint is durable."""

    def lease_taken_over(self, record: LeaseTakeover) -> None:
        """This process claimed a session another owner had held."""


class NoMeter:
    """The meter of a runtime given none: every record dropped."""

    def turn_ran(self, record: TurnRun) -> None:
        pass

    def model_called(self, record: ModelRun) -> None:
        pass

    def tool_called(self, record: ToolRun) -> None:
        pass

    def step_committed(self, record: StepCommitted) -> None:
        pass

    def lease_taken_over(self, record: LeaseTakeover) -> None:
        pass
