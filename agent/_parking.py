"""What a park writes: the suspended checkpoint, its requests and their timers (expiry,
reminder, escalation).

The calls of one batch that each asked a person park together: one checkpoint holds every
request (`agent._hitl_requests.with_requests`), each with its own answerers, digest and expiry
timer, so each is answered, denied or expires on its own, and the turn resumes when none waits.
Nothing stays in memory: the checkpoint carries the opening, the policy and the inbound event
(its raw payload left out) the turn replays with.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent._hitl_checks import workspace_of
from agent._hitl_requests import InputRequest, with_requests
from agent._messages import JsonValue
from agent._policy import TurnPolicy
from agent._signals import ParkTurn
from agent.seams import ApprovalTimer, TimerKind, TurnRecord


def park_checkpoint(
    turn: TurnRecord, policy: TurnPolicy, parks: Sequence[ParkTurn], now: float
) -> tuple[list[InputRequest], JsonValue, list[ApprovalTimer]]:
    """The requests as stored (each with its deadline), the checkpoint and the timers a park
    on `parks` (call order) commits in one transaction, so no restart can lose a deadline."""
    requests: list[InputRequest] = []
    timers: list[ApprovalTimer] = []
    for park in parks:
        request = park.request
        expires_at = None if park.expires_after is None else now + park.expires_after
        timers.extend(
            park.reminders.timers(
                session=turn.session,
                kind=TimerKind.INPUT,
                turn_id=turn.turn_id,
                request_id=request.id,
                now=now,
                expires_at=expires_at,
            )
        )
        if park.expires_after is not None:
            due = now + park.expires_after
            request = request.model_copy(update={"expires_at": due})
            timers.append(
                ApprovalTimer(
                    session=turn.session,
                    kind=TimerKind.INPUT,
                    turn_id=turn.turn_id,
                    request_id=request.id,
                    due_at=due,
                    expires_after=park.expires_after,
                    created_at=now,
                )
            )
        requests.append(request)
    inbound = turn.input.inbound
    checkpoint: dict[str, JsonValue] = {
        "turn_id": turn.turn_id,
        "opening_text": turn.input.text,
        "policy": policy.to_json(),
        "inbound": inbound.model_dump(mode="json") if inbound else None,
        "workspace": workspace_of(turn.input),
        "parked_at": now,
    }
    return requests, with_requests(checkpoint, requests), timers
