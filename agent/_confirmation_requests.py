"""What `confirmation.requested` announces of a proposed write, for either confirmation mode
(`confirmation="required"`, or a capability that asked): one shape every surface answers."""

from __future__ import annotations

from agent._hitl_requests import ConfirmationRequest
from agent._records import ConfirmationRecord
from agent._tools import Tool


def confirmation_request(
    record: ConfirmationRecord, tool: Tool, *, quorum: bool
) -> ConfirmationRequest:
    """What `confirmation.requested` announces of a proposal just recorded (so still pending).
    One voter of several must not waive the others' votes on later calls (a grant), nor change
    what they approve (an edit), so a quorum's proposal offers neither."""
    grantable_for = None if quorum else tool.grantable_for
    editable = list(tool.editable) if tool.editable and not quorum else None
    return ConfirmationRequest(
        id=record.confirmation_id,
        turn_id=record.turn_id,
        call_id=record.call_id,
        tool=record.tool,
        arguments=record.arguments,
        prompt=record.prompt,
        answerers=record.answerers,
        details=record.details,
        expires_at=record.expires_at,
        grantable_for=grantable_for,
        editable=editable,
    )
