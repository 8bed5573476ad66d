"""The store's role for reminders and escalations of unanswered requests: claim a due one and
log its event in one transaction, and read back the escalations that fired.

Their timers are `ApprovalTimer` rows (actions `remind`, `escalate`) committed with the request
and deleted with its end, as an expiry's are; `due_timers` lists them until they fire. Firing is
a claim (`fired_at` set only where it is still NULL, on a row that still exists), so of two
clocks sweeping the same timer exactly one logs its event, and none does once the request ended.
An escalation's row stays, fired, until the request ends: it is the durable fact that its
answerers may answer.

Its contract: tests/contract/test_followups_store.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from agent._events import TurnEvent
from agent._records import ApprovalTimer, TimerKind


class FollowUps(Protocol):
    """Reminders and escalations of requests nobody has answered yet."""

    async def fire_timer(
        self, timer: ApprovalTimer, now: float, events: Sequence[TurnEvent] = ()
    ) -> list[TurnEvent]:
        """Claim `timer` (a `remind` or `escalate` one, matched by session, kind, turn, request
        and action): if its row exists and has not fired, set `fired_at` to `now` and log
        `events`, numbered as `resume_turn` numbers them, in one transaction; return them.
        Otherwise (fired already, or its request ended and took the row with it) write nothing
        and return `[]`."""
        ...

    async def fired_escalations(
        self, session: str, kind: TimerKind, turn_id: str, request_id: str
    ) -> list[ApprovalTimer]:
        """The request's escalations that have fired (`[]` for none, or an ended request)."""
        ...
