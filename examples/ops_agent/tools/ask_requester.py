"""A remote tool that parks: the turn stops until the person who asked answers a yes/no question,
for a decision the agent must not take alone and that no write tool covers (does the customer
keep a damaged item, or send it back before anyone proposes a refund?).

Nothing waits in memory: the turn is suspended durably and resumes, on any worker, when the
answer comes: Slack's Approve (yes) / Deny (no, with the reason the person typed), the HTTP API's
`POST /sessions/{key}/resume` (`"value": true` or `false`), or the operator CLI. Only the turn's
speaker may answer (the engine's default answerer); a turn nobody spoke (a schedule) cannot park
here, and the model reads why. Code before `request_input` runs again when the turn resumes, so
nothing with an effect goes there.
"""

from __future__ import annotations

from typing import Any

from agent import ToolContext, ToolError, tool

MAX_QUESTION = 500


@tool
async def ask_requester(question: str, ctx: ToolContext) -> dict[str, Any]:
    """Ask the person who wrote to you a yes/no question and wait for their answer (it may take
    days). Use it for a decision that is theirs, not for approving a refund or a reservation
    (those ask by themselves). Returns `answer` ("yes" or "no") and any `note` they added."""
    asked = " ".join(question.split())
    if not asked or len(asked) > MAX_QUESTION:
        raise ToolError(f"question must be 1 to {MAX_QUESTION} characters")
    # One request per call: the same question asked twice in a turn gets two answers.
    request_id = f"ask-{ctx.call_id}"
    answer = await ctx.request_input(id=request_id, prompt=asked, schema={"type": "boolean"})
    return {
        "question": asked,
        "answer": "yes" if answer is True else "no",
        "note": ctx.answer_reason(request_id),
    }
