"""Approval without asking anyone: a standing grant, or the agent's `approve_automatically`.

A `confirmation="required"` call a live standing grant covers (`agent._hitl_grants`) runs
approved by it, recorded the same way as a policy's approval below (policy "standing-grant",
`by` "grant:<id>"); otherwise the agent's rule is asked.

Every proposed write used to need a person, so a $2 refund from a scheduled turn (nobody spoke,
nobody to ask) could not run at all. An agent may now declare a rule, an async hook beside
`authorize_answer`, that is shown each `confirmation="required"` call before a person is asked
and may approve it as a named policy ("small-refunds") with a reason.

The decision is a checkpoint, committed before the call runs: an `approval:<call>` step holding
the policy, the confirmation row recorded as already accepted (`by` "policy:<name>", so the
audit lists it beside the writes people approved), and an `approval.automatic` event the
surfaces show. A crash after it replays the call under the recorded approval and never asks the
hook again; asking again could say no once the approved write counts against the rule's own
budget, and the call would then go to a person and run a second time under another key. A crash
before it leaves nothing behind, so the hook is simply asked again.

A hook that fails, or returns anything but a `PolicyApproval` or None, approves nothing: the call
goes to a person as before (logged with the exception's class, never its text, which may carry
what the hook read).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from agent._events import ApprovedByPolicy
from agent._hitl_answer_notes import answered_note, clean_reason, note_step_id
from agent._hitl_answerers import QuorumAnswerer
from agent._hitl_checks import answer_step_id, workspace_of
from agent._hitl_grants import covering_grant, grant_reason
from agent._hitl_policy_hook import ApproveAutomatically, PolicyApproval, ProposedWrite
from agent._messages import ToolCall
from agent._signals import ParkTurn
from agent._tool_turn import ToolTurn
from agent._tools import Tool
from agent._turn_input import ConfirmationAnswer
from agent.seams import ConfirmationRecord, ConfirmationStatus, GrantRecord, StepCommit

log = logging.getLogger("agent.approvals")

POLICY_BY = "policy:"
"""How a confirmation approved by a policy names who answered: `policy:<name>`."""
GRANT_BY = "grant:"
"""And one a standing grant let through: `grant:<grant id>`."""
HOOK_SECONDS = 10.0
"""How long the rule may take; past it the call goes to a person (a turn never hangs on it)."""
STANDING_GRANT = "standing-grant"
"""The policy name a call let through by a standing grant is recorded under."""


def approval_step_id(call_id: str) -> str:
    return f"approval:{call_id}"


def policy_answer(turn: ToolTurn, call: ToolCall) -> ConfirmationAnswer | None:
    """The approval a policy recorded for this very call in this turn, if it did."""
    step = turn.steps.get(approval_step_id(call.id))
    if not isinstance(step, dict) or not isinstance(step.get("confirmation_id"), str):
        return None
    return ConfirmationAnswer(
        confirmation_id=step["confirmation_id"],
        accepted=True,
        tool=call.name,
        call_id=call.id,
        arguments=dict(call.input),
    )


def policy_note(turn: ToolTurn, call: ToolCall) -> str | None:
    """What the model reads beside the call's result: which rule approved it, and why."""
    step = turn.steps.get(approval_step_id(call.id))
    if not isinstance(step, dict):
        return None
    return f"Approved automatically by policy {step.get('policy')}: {step.get('reason')}"


async def approved_by_policy(turn: ToolTurn, call: ToolCall, tool: Tool) -> bool:
    """Whether this call runs without a person: approved earlier in this turn (a replay), or
    now by the agent's hook, whose approval is committed before this returns True."""
    if policy_answer(turn, call) is not None:
        return True
    grant = await covering_grant(turn, tool)
    if grant is not None:
        granted = PolicyApproval(policy=STANDING_GRANT, reason=grant_reason(grant))
        await turn.commit(_approval_commit(turn, call, tool, granted, grant=grant))
        return True
    hook = turn.env.agent.approve_automatically
    if hook is None:
        return False
    approval = await _ask(hook, _shown(turn, call))
    if approval is None:
        return False
    await turn.commit(_approval_commit(turn, call, tool, approval))
    return True


ANSWER_ROUNDS = 16
"""How many of one call's yes-or-no requests a rule may answer in a row before the next one
goes to a person (each answer re-runs the call from the top, as a resume would)."""


async def answered_by_policy(turn: ToolTurn, call: ToolCall, park: ParkTurn) -> bool:
    """Whether the agent's rule answered this yes-or-no request (True) instead of a person.
    Its answer is committed, with the `approval.automatic` event, before this returns True;
    the caller then runs the call again, and `request_input` returns the answer, exactly as
    after a resume. Only a request with no schema or a boolean one, and never a `Quorum`'s
    (several people must approve it, a rule is not several people)."""
    hook = turn.env.agent.approve_automatically
    request = park.request
    yes_or_no = request.json_schema in (None, {"type": "boolean"})
    if hook is None or not yes_or_no or isinstance(request.answerers, QuorumAnswerer):
        return False
    approval = await _ask(hook, _shown(turn, call, input_id=request.id, prompt=request.prompt))
    if approval is None:
        return False
    reason = clean_reason(approval.reason, turn.env.redact) or approval.policy
    event = ApprovedByPolicy(
        session=turn.session,
        turn_id=turn.turn_id,
        call_id=call.id,
        tool=call.name,
        input_id=request.id,
        policy=approval.policy,
        reason=reason,
    )
    # The answer first, with its event: a crash before the note leaves an answered request
    # (never asked again) whose reason the model does not read; the event still says it.
    answer = StepCommit(
        turn_id=turn.turn_id,
        step_id=answer_step_id(turn.turn_id, request.id),
        step_value=True,
        events=[event],
    )
    await turn.commit(answer)
    note = answered_note(f"{POLICY_BY}{approval.policy}", reason)
    await turn.commit(
        StepCommit(
            turn_id=turn.turn_id, step_id=note_step_id(turn.turn_id, request.id), step_value=note
        )
    )
    return True


def _shown(
    turn: ToolTurn, call: ToolCall, *, input_id: str | None = None, prompt: str | None = None
) -> ProposedWrite:
    """What the rule is shown of a call (and, with `input_id`, of the request it makes)."""
    turn_input = turn.turn.input
    speaker = turn_input.inbound.user if turn_input.inbound is not None else None
    return ProposedWrite(
        session=turn.session,
        turn_id=turn.turn_id,
        call_id=call.id,
        tool=call.name,
        arguments=dict(call.input),
        asked_by=speaker.id if speaker is not None and speaker.attested else None,
        trigger_by=turn_input.trigger.by if turn_input.trigger is not None else None,
        workspace=workspace_of(turn_input),
        input_id=input_id,
        prompt=prompt,
    )


async def _ask(hook: ApproveAutomatically, proposal: ProposedWrite) -> PolicyApproval | None:
    try:
        async with asyncio.timeout(HOOK_SECONDS):
            chosen: Any = await hook(proposal)
    except Exception as exc:  # TimeoutError included: a rule that hangs approves nothing
        log.warning(
            "approve_automatically failed (%s) for %s in %s; a person is asked instead",
            type(exc).__name__,
            proposal.tool,
            proposal.session,
        )
        return None
    if chosen is None or isinstance(chosen, PolicyApproval):
        return chosen
    log.warning(
        "approve_automatically returned a %s for %s, not a PolicyApproval or None; a person "
        "is asked instead",
        type(chosen).__name__,
        proposal.tool,
    )
    return None


def _answered_by(approval: PolicyApproval, grant: GrantRecord | None) -> str:
    return f"{GRANT_BY}{grant.grant_id}" if grant is not None else f"{POLICY_BY}{approval.policy}"


def _approval_commit(
    turn: ToolTurn,
    call: ToolCall,
    tool: Tool,
    approval: PolicyApproval,
    *,
    grant: GrantRecord | None = None,
) -> StepCommit:
    now = turn.env.clock()
    confirmation_id = f"{turn.turn_id}:{call.id}"
    reason = clean_reason(approval.reason, turn.env.redact) or approval.policy
    record = ConfirmationRecord(
        session=turn.session,
        confirmation_id=confirmation_id,
        turn_id=turn.turn_id,
        call_id=call.id,
        tool=tool.name,
        arguments=dict(call.input),
        prompt=f"Allow {tool.name} with {json.dumps(call.input, sort_keys=True)}?",
        status=ConfirmationStatus.ACCEPTED,
        by=_answered_by(approval, grant),
        created_at=now,
        resolved_at=now,
        reason=reason,
    )
    event = ApprovedByPolicy(
        session=turn.session,
        turn_id=turn.turn_id,
        call_id=call.id,
        tool=tool.name,
        confirmation_id=confirmation_id,
        policy=approval.policy,
        reason=reason,
        grant_id=grant.grant_id if grant is not None else None,
        granted_by=grant.granted_by if grant is not None else None,
    )
    return StepCommit(
        turn_id=turn.turn_id,
        step_id=approval_step_id(call.id),
        step_value={
            "confirmation_id": confirmation_id,
            "policy": approval.policy,
            "reason": reason,
        },
        events=[event],
        confirmations=[record],
    )
