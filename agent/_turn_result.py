"""How a turn ended, as the session API reports it and as the turns table stores it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent._hitl_requests import InputRequest
from agent._messages import Usage
from agent._records import TurnRecord, TurnStatus


@dataclass(frozen=True, kw_only=True)
class TurnResult:
    turn_id: str
    status: TurnStatus
    text: str = ""
    error: str | None = None
    reason: str | None = None
    request: InputRequest | None = None
    """What a suspended turn waits for (what `resume` answers): the first, when several wait."""
    requests: tuple[InputRequest, ...] = ()
    """Every request a suspended turn waits for, in call order (the calls of one batch that
    each asked park together); `(request,)` when one waits, `()` when none."""
    usage: Usage = field(default_factory=Usage)
    replayed: bool = False
    note: str | None = None
    """Set when a completed turn's last reply is empty: what the turn did instead (its tool
    calls and their outcomes), or that the agent had nothing to add (`agent._turn_outcome`).
    Set too when the model refused: that it declined, and why if the API said (`agent._stops`);
    `text` is then what it said before it was stopped."""

    def to_json(self) -> dict[str, Any]:
        stored: dict[str, Any] = {
            "status": self.status.value,
            "text": self.text,
            "error": self.error,
            "reason": self.reason,
            "request": self.request.to_json() if self.request is not None else None,
            "usage": self.usage.model_dump(),
        }
        if self.note is not None:  # only then: every other result is stored as it always was
            stored["note"] = self.note
        if len(self.requests) > 1:  # likewise: a park on one request is stored as it was
            stored["requests"] = [request.to_json() for request in self.requests]
        return stored

    @classmethod
    def from_record(cls, record: TurnRecord, *, replayed: bool = False) -> TurnResult:
        data: dict[str, Any] = record.result if isinstance(record.result, dict) else {}
        return cls(
            turn_id=record.turn_id,
            status=record.status,
            text=data.get("text") or "",
            error=data.get("error"),
            reason=data.get("reason") or record.cancel_reason,
            request=_request(data.get("request")),
            requests=_requests(data),
            usage=Usage.model_validate(data.get("usage") or {}),
            replayed=replayed,
            note=data.get("note"),
        )


def _request(stored: Any) -> InputRequest | None:
    return InputRequest.model_validate(stored) if isinstance(stored, dict) else None


def _requests(data: dict[str, Any]) -> tuple[InputRequest, ...]:
    several = data.get("requests")
    if isinstance(several, list):
        return tuple(InputRequest.model_validate(stored) for stored in several)
    one = _request(data.get("request"))
    return (one,) if one is not None else ()
