"""Who stopped a turn, as it is recorded and shown: light enough for the command line's
`bot cancel` and the renderer to share without importing Slack's Stop handler
(`bot.slack.stops`). Why it stopped is the engine's `agent.CancelReason`."""

from __future__ import annotations

OPERATOR = "operator"
"""Who `bot cancel` records as having stopped turns when it names nobody: the thread then says
they were stopped by an operator, not by a person in it."""


def stopper(by: str | None) -> str:
    """Who stopped, as the thread says it: a person's mention, or an operator."""
    return "an operator" if by == OPERATOR else f"<@{by}>"
