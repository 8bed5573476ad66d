"""How a turn's commit timestamps become a per-step cost, the same way for engine and floor."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class TurnTiming:
    step_us: float
    """Mean µs per step from the turn's first commit to its last: the transcript load and the
    lease are before the first commit, so a step that read the whole transcript would show here
    and nothing that legitimately happens once per turn does."""
    turn_us: float
    """Whole turn (queueing, lease, transcript load, release) divided by its steps."""
    steps: int


def from_marks(marks: Sequence[int], started_ns: int, ended_ns: int) -> TurnTiming:
    """`marks` are perf_counter_ns readings taken right after each commit of one turn."""
    if len(marks) < 2:
        raise ValueError(f"a turn needs at least two commits to time a step, got {len(marks)}")
    return TurnTiming(
        step_us=(marks[-1] - marks[0]) / (len(marks) - 1) / 1000,
        turn_us=(ended_ns - started_ns) / len(marks) / 1000,
        steps=len(marks) - 1,
    )


@dataclass(frozen=True, kw_only=True)
class Summary:
    median: float
    spread: float
    """Median absolute deviation as a fraction of the median: how far to trust a 1.1x ratio."""


def summarise(values: Sequence[float]) -> Summary:
    median = statistics.median(values)
    deviation = statistics.median(abs(v - median) for v in values)
    return Summary(median=median, spread=deviation / median if median else 0.0)
