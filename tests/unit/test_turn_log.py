"""The per-turn log line, and the fan-out of the engine's records to several meters."""

from __future__ import annotations

import logging

import pytest

from agent.seams import LeaseTakeover, ModelRun, NoMeter, TokenCounts, ToolRun, TurnRun
from bot.core.turn_log import Meters, TurnLog


def run(outcome: str = "completed", error: str | None = None) -> TurnRun:
    return TurnRun(
        agent="ops",
        session_key="slack:T1:C1:1.2",
        turn_id="T1:C1:1.3",
        outcome=outcome,  # type: ignore[arg-type]
        seconds=1.25,
        steps=4,
        tokens=TokenCounts(input=120, output=30, cache_read=900, cache_write=0),
        trace_id="ab" * 16,
        error=error,
    )


def test_a_run_is_one_line_with_what_an_operator_looks_up(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.turns")
    TurnLog().turn_ran(run())
    [record] = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == "turn completed in 1250 ms"
    fields = record.__dict__
    assert (fields["session"], fields["turn_id"], fields["trace_id"]) == (
        "slack:T1:C1:1.2",
        "T1:C1:1.3",
        "ab" * 16,
    )
    assert (fields["outcome"], fields["steps"], fields["duration_ms"]) == ("completed", 4, 1250.0)
    assert (fields["input_tokens"], fields["output_tokens"], fields["cache_read_tokens"]) == (
        120,
        30,
        900,
    )


def test_a_failed_run_logs_a_warning_with_its_kind(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="bot.turns")
    TurnLog().turn_ran(run("failed", error="ModelError"))
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.__dict__["error_type"] == "ModelError"


class Recording(NoMeter):
    def __init__(self) -> None:
        self.seen: list[object] = []

    def turn_ran(self, record: TurnRun) -> None:
        self.seen.append(record)

    def tool_called(self, record: ToolRun) -> None:
        self.seen.append(record)


class Broken(NoMeter):
    def turn_ran(self, record: TurnRun) -> None:
        raise RuntimeError("meter down")


def test_meters_fan_out_past_one_that_raises_and_log_it_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    first, last = Recording(), Recording()
    meters = Meters([first, Broken(), last])
    for _ in range(3):
        meters.turn_ran(run())
    tool = ToolRun(agent="ops", tool="refund", outcome="denied", seconds=0.1)
    meters.tool_called(tool)
    meters.model_called(
        ModelRun(agent="ops", model="m", seconds=1, tokens=TokenCounts(), stop_reason="end_turn")
    )
    meters.lease_taken_over(LeaseTakeover(session_key="s"))
    assert len(first.seen) == len(last.seen) == 4
    assert last.seen[-1] == tool
    failures = [r for r in caplog.records if "meter failed" in r.getMessage()]
    assert len(failures) == 1
