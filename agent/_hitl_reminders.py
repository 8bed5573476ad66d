"""Reminders and escalation of a request nobody answers: what a tool or a call declares, and the
durable timers it becomes.

A request (a proposed write, a parked `ctx.request_input`) may carry `remind_after` (seconds:
whoever may answer is reminded once) and `escalate_after=(seconds, answerers)` (from then on
those answerers may answer it too, and are told). Both become `ApprovalTimer` rows committed with
the request itself, beside its expiry timer, so nothing waits in memory: whichever process
sweeps first fires each one, once (`agent._hitl_reminding`), and the transaction that ends the
request deletes them all. A follow-up due at or after the request's expiry is not written: it
could never fire while the request waits.

An escalation widens who may answer and never what answering takes: a request that needs two
approvals still needs two, from its own answerers or the escalation's. So its answerers are one
person, a policy, or a list of people any of whom may answer; a quorum of its own is refused.

A leaf module (answerers and records), so tools, contexts and the park can all hold it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import pydantic

from agent._hitl_answerers import (
    Answerer,
    AnswererInput,
    QuorumAnswerer,
    parse_answerer,
)
from agent._records import ApprovalTimer, TimerAction, TimerKind


@dataclass(frozen=True, kw_only=True)
class Escalation:
    """After `after` seconds unanswered, `answerers` may answer the request too."""

    after: float
    answerers: Answerer


EscalationInput: TypeAlias = (
    Escalation | tuple[float, AnswererInput | Sequence[str]] | list[object] | None
)
"""What a declaration takes: an `Escalation`, or `(seconds, answerers)` where answerers is a
`UserAnswerer` / `PolicyAnswerer` (or their dict shape) or a list of user ids."""


@dataclass(frozen=True, kw_only=True)
class Reminders:
    """A request's follow-ups while it waits: a reminder, an escalation, either or neither."""

    remind_after: float | None = None
    escalate: Escalation | None = None

    def __bool__(self) -> bool:
        return self.remind_after is not None or self.escalate is not None

    def timers(
        self,
        *,
        session: str,
        kind: TimerKind,
        turn_id: str,
        request_id: str,
        now: float,
        expires_at: float | None,
    ) -> list[ApprovalTimer]:
        """The rows committed with the request; none due at or after its expiry."""
        planned: list[tuple[TimerAction, float, Answerer | None]] = []
        if self.remind_after is not None:
            planned.append((TimerAction.REMIND, self.remind_after, None))
        if self.escalate is not None:
            planned.append((TimerAction.ESCALATE, self.escalate.after, self.escalate.answerers))
        return [
            ApprovalTimer(
                session=session,
                kind=kind,
                turn_id=turn_id,
                request_id=request_id,
                due_at=now + after,
                expires_after=after,
                created_at=now,
                action=action,
                answerers=answerers,
            )
            for action, after, answerers in planned
            if expires_at is None or now + after < expires_at
        ]


NO_REMINDERS = Reminders()


def reminders_of(
    remind_after: float | None, escalate_after: EscalationInput, *, what: str
) -> Reminders:
    """Check and normalise a declaration; `ValueError` naming `what` and the accepted shapes."""
    remind = _seconds(remind_after, what=f"{what}: remind_after")
    escalate = _escalation(escalate_after, what=f"{what}: escalate_after")
    return Reminders(remind_after=remind, escalate=escalate)


def overridden(
    base: Reminders, remind_after: float | None, escalate_after: EscalationInput, *, what: str
) -> Reminders:
    """A call's own follow-ups over the tool's: each one given replaces the tool's."""
    own = reminders_of(remind_after, escalate_after, what=what)
    return Reminders(
        remind_after=own.remind_after if remind_after is not None else base.remind_after,
        escalate=own.escalate if escalate_after is not None else base.escalate,
    )


def _seconds(value: object, *, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{what} must be a number of seconds, got {value!r}")
    if not 0 < value < math.inf:
        raise ValueError(f"{what} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def _escalation(value: EscalationInput, *, what: str) -> Escalation | None:
    if value is None:
        return None
    after: object
    who: object
    if isinstance(value, Escalation):
        after, who = value.after, value.answerers
    elif isinstance(value, tuple | list) and len(value) == 2:
        after, who = value[0], value[1]
    else:
        raise ValueError(f"{what} must be (seconds, answerers) or an Escalation, got {value!r}")
    seconds = _seconds(after, what=what)
    assert seconds is not None
    return Escalation(after=seconds, answerers=_escalation_answerers(who, what=what))


def _escalation_answerers(who: object, *, what: str) -> Answerer:
    if isinstance(who, list | tuple) and all(isinstance(user, str) for user in who):
        try:
            return QuorumAnswerer(quorum=1, users=tuple(who))
        except pydantic.ValidationError:
            raise ValueError(f"{what}: the users must be different, non-empty ids") from None
    try:
        chosen = parse_answerer(who)  # type: ignore[arg-type]  # checked by pydantic
    except pydantic.ValidationError:
        raise ValueError(
            f"{what}: answerers must be {{'user': id}}, {{'policy': p, 'scope': s}} or a list "
            f"of user ids, got {who!r}"
        ) from None
    if isinstance(chosen, QuorumAnswerer) and chosen.quorum != 1:
        raise ValueError(
            f"{what}: an escalation adds people who may answer; it cannot need several "
            "approvals of its own (the request's own quorum still applies)"
        )
    return chosen
