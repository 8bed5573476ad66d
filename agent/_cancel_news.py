"""A cancellation heard by signal (in this process, or from another through the dispatcher):
which runner of the session it stops, and why. The durable request was stored first; the news
only makes it take effect before the next heartbeat reads it."""

from __future__ import annotations

from dataclasses import dataclass

from agent._turn_loop import TurnRunner


@dataclass(frozen=True, kw_only=True)
class CancelNews:
    reason: str
    keep: str | None = None
    only: str | None = None

    def apply(self, runner: TurnRunner) -> None:
        if runner.turn_id == self.keep or (self.only is not None and runner.turn_id != self.only):
            return
        runner.cancellation.cancel(self.reason)
