"""The words a stopped turn is recorded and shown with: light enough for the command line's
`bot cancel` and the renderer to share without importing Slack's Stop handler
(`bot.slack.stops`)."""

from __future__ import annotations

STOPPED = "stopped"
"""The cancellation reason a Stop gives its turns."""
OPERATOR = "operator"
"""Who `bot cancel` records as having stopped turns when it names nobody: the thread then says
they were stopped by an operator, not by a person in it."""


def stopper(by: str | None) -> str:
    """Who stopped, as the thread says it: a person's mention, or an operator."""
    return "an operator" if by == OPERATOR else f"<@{by}>"
