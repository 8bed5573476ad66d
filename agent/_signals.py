"""Control-flow signals. They derive from `BaseException` on purpose: a tool's broad
`except Exception` must not swallow a park or a cancellation, or the turn would run on as if the
person had answered or the cancel had never been asked for.
"""

from __future__ import annotations

import asyncio

from agent._hitl_reminders import NO_REMINDERS, Reminders
from agent._hitl_requests import InputRequest


class TurnSignal(BaseException):
    """Root of the engine's own control flow."""


class ParkTurn(TurnSignal):
    """A tool asked a person; the turn stops here and waits, holding nothing in memory."""

    def __init__(
        self,
        request: InputRequest,
        *,
        expires_after: float | None = None,
        reminders: Reminders = NO_REMINDERS,
    ) -> None:
        super().__init__(request.id)
        self.request = request
        self.expires_after = expires_after
        """Seconds the request may wait for an answer; None: forever."""
        self.reminders = reminders
        """Its reminder and escalation while it waits."""
        self.siblings: tuple[ParkTurn, ...] = ()
        """Other calls of the same batch that asked too (call order): the turn parks on all."""

    @property
    def parks(self) -> tuple[ParkTurn, ...]:
        """This park and its siblings, in call order."""
        return (self, *self.siblings)

    @classmethod
    def together(cls, parks: list[ParkTurn]) -> ParkTurn:
        """One signal for the batch's parks (call order): the first, carrying the others."""
        first = cls(
            parks[0].request,
            expires_after=parks[0].expires_after,
            reminders=parks[0].reminders,
        )
        first.siblings = tuple(parks[1:])
        return first


class CancelTurn(TurnSignal):
    """The turn was cancelled; raised at a checkpoint boundary."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CancellationSignal:
    """What a remote tool watches to stop early; `cancelled` is cheap to poll, `wait()` to await."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str) -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    async def wait(self) -> str:
        await self._event.wait()
        return self.reason or ""
