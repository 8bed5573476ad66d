"""The two stop reasons that are neither a finished reply nor a failure: refusal and pause_turn.

- `refusal`: the API's classifiers stopped the model mid-reply
  (https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals).
  The reply is committed as the user saw it (its tool calls dropped: none may run), marked by its
  stop reason, and the turn completes with a note that says plainly the model declined, so a
  surface never shows a cut-off answer as if it were whole. The doc asks for the refused turn to
  be removed before the conversation goes on (re-sending it draws the refusal again), so the
  adapter leaves the whole turn out of every later request; the transcript keeps it, so what
  the user was shown stays on record.
- `pause_turn`: the API paused a long turn and expects the paused message back, as it is, to
  continue it (https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons).
  A paused step is not a finished one: it commits like a step with tool calls, and the loop
  calls the model again with the paused message last. Steps are keyed by transcript index, so a
  crash between the two replays from the committed pause. A model that pauses `MAX_PAUSES`
  times in a row fails the turn rather than loop forever.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent._errors import ModelError
from agent._messages import AssistantMessage, ContentBlock, Message, ToolCall
from agent._model_seam import ModelReply

REFUSAL = "refusal"
PAUSE_TURN = "pause_turn"
MAX_PAUSES = 10
DECLINED = "The model declined to answer this request."
LEFT_OUT = "It is left out of the conversation from here on: rephrase it or ask something else."


def declined_line(reply: ModelReply) -> str | None:
    """What the user is told of a refusal (None for any other stop): one line, with the API's
    own explanation when it gave one."""
    if reply.stop_reason != REFUSAL:
        return None
    why = (reply.stop_explanation or "").strip()
    return " ".join(part for part in (DECLINED, why, LEFT_OUT) if part)


def kept_content(reply: ModelReply) -> tuple[ContentBlock, ...]:
    """A refusal's tool calls are dropped: generation stopped inside them, and none may run."""
    if reply.stop_reason != REFUSAL:
        return reply.content
    return tuple(b for b in reply.content if not isinstance(b, ToolCall))


def paused_in_a_row(turn: Sequence[Message]) -> int:
    """How many of the turn's last model steps paused, back to the last that did not."""
    count = 0
    for message in reversed(turn):
        if not isinstance(message, AssistantMessage) or message.stop_reason != PAUSE_TURN:
            break
        count += 1
    return count


def too_many_pauses(stop_reason: str, turn: Sequence[Message]) -> ModelError | None:
    if stop_reason == PAUSE_TURN and paused_in_a_row(turn) + 1 > MAX_PAUSES:
        return ModelError(
            f"the model paused its turn {MAX_PAUSES + 1} times in a row without finishing it"
        )
    return None


def continued_text(turn: Sequence[Message], last: AssistantMessage) -> str:
    """A completed turn's text: its last reply, after the paused replies it continues."""
    paused = paused_in_a_row(turn)
    replies = [*turn[len(turn) - paused :], last] if paused else [last]
    return (
        "\n\n".join(m.text for m in replies if isinstance(m, AssistantMessage) and m.text.strip())
        or last.text
    )
