"""What the engine refuses to commit of a model reply, whatever `Model` wrote it.

- An abnormal stop (max_tokens, refusal, ...) that says nothing, or that stopped inside tool
  calls: empty, it would leave the user with silence; with calls, generation stopped before the
  model finished them, so an input may be cut short yet parse (an amount of `100` cut from
  `100000`). Adapters check this too (and can say which limit to raise); this is the engine's
  own guard.
- A tool call id used already in the turn, or twice in the reply. The turn's keys are built
  from it (the step `tool:<n>:<id>`, the proposed write `<turn>:<id>`, the planned call of an
  approval `<id>_confirmed`), so committing it would clash with the row the first use made on
  every try; and the Messages API refuses a request whose `tool_use` ids repeat. Anthropic's
  ids never repeat; a scripted or hand-written model's may.

- A pause after `MAX_PAUSES` pauses in a row (`agent._stops`).

Either fails the turn before anything of the reply is committed or run (`TurnFailure`). A refusal
is no abnormal stop here: it commits, empty or not, with its calls dropped (`agent._stops`); a
pause commits even empty, since the turn goes on.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent._errors import AbnormalStopError, ModelError
from agent._messages import AssistantMessage, Message
from agent._stops import PAUSE_TURN, REFUSAL, too_many_pauses

NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence"})


def refused(
    stop_reason: str, reply: AssistantMessage, turn: Sequence[Message]
) -> ModelError | None:
    """Why `reply` (not yet committed) must not be, given the turn's messages so far."""
    if stop_reason not in NORMAL_STOPS and stop_reason != REFUSAL:
        abnormal = _abnormal(stop_reason, reply) or too_many_pauses(stop_reason, turn)
        if abnormal is not None:
            return abnormal
    used = {c.id for m in turn if isinstance(m, AssistantMessage) for c in m.tool_calls}
    for call in reply.tool_calls:
        if call.id in used:
            return ModelError(
                f"the model's reply reuses the tool call id {call.id!r} (of {call.name}), "
                "already used in this turn; each call needs an id of its own, so none of its "
                "calls ran"
            )
        used.add(call.id)
    return None


def _abnormal(stop_reason: str, reply: AssistantMessage) -> ModelError | None:
    if reply.tool_calls:
        names = ", ".join(call.name for call in reply.tool_calls)
        return AbnormalStopError(
            f"the model stopped ({stop_reason}) in the middle of a tool call ({names}); no "
            "call was run, since its input may be incomplete"
        )
    if not reply.text and stop_reason != PAUSE_TURN:
        return AbnormalStopError(f"the model stopped with {stop_reason!r} and an empty reply")
    return None
