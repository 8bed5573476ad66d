"""What a turn's result says beside its status, read off the turn's own messages.

- `text`: a completed turn's is its last reply, exactly as the model said it. A turn that parked,
  was cancelled or failed has no last reply: its text is what the model said in it so far (its
  replies joined by a blank line), so a client is not told the model was silent when it spoke.
- `usage`: summed over every model step of the turn, including those before a park (the turn's
  messages are in the transcript across it); never zero for a turn whose model was called.
- `note`: only when a completed turn's last reply is empty. The text stays empty (nothing is
  put in the model's mouth); the note says what the turn did instead, each tool call with its
  outcome (`ok`, `failed`, `denied`, ...), or that the agent had nothing to add. Surfaces show it
  where they would have shown the reply, so an empty reply is never silence.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent._hitl_answer_notes import EXPIRY_BY
from agent._messages import AssistantMessage, Message, ToolMessage, Usage
from agent._turn_input import TurnInput

NOTHING_TO_ADD = "The agent had nothing to add."
MAX_NOTED_CALLS = 10
"""A note names this many calls at most, then says how many more there were."""


def said_so_far(messages: Sequence[Message]) -> str:
    """What the model said in these messages of one turn, reply by reply."""
    return "\n\n".join(
        m.text for m in messages if isinstance(m, AssistantMessage) and m.text.strip()
    )


def turn_usage(messages: Sequence[Message], extra: Usage | None = None) -> Usage:
    """The tokens of the turn's model steps: its assistant messages, and `extra` (the reply
    being committed now, not yet among them)."""
    total = extra or Usage()
    for message in messages:
        if isinstance(message, AssistantMessage):
            total = total + message.usage
    return total


def empty_reply_note(messages: Sequence[Message], opening: TurnInput) -> str:
    """What a completed turn whose last reply is empty did instead, in a sentence."""
    outcomes: list[str] = []
    answer = opening.confirmation
    if answer is not None and not answer.accepted:
        expired = opening.trigger is not None and opening.trigger.by == EXPIRY_BY
        outcomes.append(f"{answer.tool} ({'expired' if expired else 'denied'})")
    outcomes += [f"{m.name} ({_outcome(m)})" for m in messages if isinstance(m, ToolMessage)]
    if not outcomes:
        return NOTHING_TO_ADD
    shown = outcomes[:MAX_NOTED_CALLS]
    if len(outcomes) > MAX_NOTED_CALLS:
        shown.append(f"and {len(outcomes) - MAX_NOTED_CALLS} more")
    return f"The agent added nothing after its tool calls: {', '.join(shown)}."


def _outcome(message: ToolMessage) -> str:
    result = message.result
    if isinstance(result, dict) and result.get("cancelled") is True:
        return "cancelled"
    if message.is_error:
        return "failed"
    if isinstance(result, dict) and result.get("status") == "confirmation_pending":
        return "not run: awaits confirmation"
    return "ok"
