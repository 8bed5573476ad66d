"""One log line per run of a turn, and the fan-out that hands the engine's records to several
meters.

The line is what an operator greps for first ("what happened to the turn in #support at 14:02"):
the outcome, how long it took, its steps and tokens, the session and turn id to look up with
`bot turns`, and the trace id to open in a tracing UI. No content: the records carry none
(`agent.seams.TurnMeter`). A completed or parked run logs at INFO, a failed one at WARNING (a
failure is the engine's verdict on a turn, already shown to the user, not a bug in the bot).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from agent.seams import (
    LeaseTakeover,
    ModelRun,
    NoMeter,
    StepCommitted,
    ToolRun,
    TurnMeter,
    TurnRun,
)

log = logging.getLogger("bot.turns")


class TurnLog(NoMeter):
    """A `TurnMeter` writing one line per run of a turn on the `bot.turns` logger (and one per
    lease takeover); the other records it leaves to the metrics."""

    def turn_ran(self, record: TurnRun) -> None:
        tokens = record.tokens
        log.log(
            logging.WARNING if record.outcome == "failed" else logging.INFO,
            "turn %s in %.0f ms",
            record.outcome,
            record.seconds * 1000,
            extra={
                "outcome": record.outcome,
                "agent": record.agent,
                "session": record.session_key,
                "turn_id": record.turn_id,
                "trace_id": record.trace_id,
                "duration_ms": round(record.seconds * 1000, 1),
                "steps": record.steps,
                "input_tokens": tokens.input,
                "output_tokens": tokens.output,
                "cache_read_tokens": tokens.cache_read,
                "cache_write_tokens": tokens.cache_write,
                "error_type": record.error,
            },
        )

    def lease_taken_over(self, record: LeaseTakeover) -> None:
        log.info("lease taken over", extra={"session": record.session_key})


class Meters:
    """Several meters as one: each record goes to every meter, in order. One that raises does
    not keep the record from the others (the engine shields itself, not each meter), and is
    logged once per meter and method, not at every step it fails."""

    def __init__(self, meters: Iterable[TurnMeter]) -> None:
        self.meters = tuple(meters)
        self._failed: set[tuple[int, str]] = set()

    def _each(self, method: str, record: object) -> None:
        for index, meter in enumerate(self.meters):
            try:
                getattr(meter, method)(record)
            except Exception:
                if (index, method) not in self._failed:
                    self._failed.add((index, method))
                    log.exception(
                        "a meter failed; its later failures are not logged",
                        extra={"meter": type(meter).__name__, "method": method},
                    )

    def turn_ran(self, record: TurnRun) -> None:
        self._each("turn_ran", record)

    def model_called(self, record: ModelRun) -> None:
        self._each("model_called", record)

    def tool_called(self, record: ToolRun) -> None:
        self._each("tool_called", record)

    def step_committed(self, record: StepCommitted) -> None:
        self._each("step_committed", record)

    def lease_taken_over(self, record: LeaseTakeover) -> None:
        self._each("lease_taken_over", record)
