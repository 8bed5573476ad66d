"""One model call of a turn, streamed: deltas and progress go out live (never stored), the final
reply comes back for the turn loop to commit, and the call is timed and traced on the way
(`agent._turn_metering`). Its errors become the turn's failure, scrubbed of secrets."""

from __future__ import annotations

import logging
from typing import Protocol

from agent._errors import ModelError
from agent._events import MAX_PROGRESS, MessageDelta, ProgressUpdated
from agent._model_stream import model_stream
from agent._signals import CancelTurn
from agent._tool_steps import TurnFailure
from agent._tool_values import describe_error
from agent._turn_env import TurnEnv
from agent.seams import ModelReply, ModelRequest, StreamRestart, TextDelta, ThinkingDelta

log = logging.getLogger("agent._turn_loop")


class StreamingTurn(Protocol):
    """What a model call needs of its turn (`agent._turn_loop.TurnRunner` has it)."""

    env: TurnEnv
    session: str
    turn_id: str

    @property
    def next_index(self) -> int: ...

    def checkpoint(self) -> None: ...

    def request(self) -> ModelRequest: ...


async def stream_reply(turn: StreamingTurn) -> ModelReply:
    """Deltas and progress go out live only; progress is never part of the step's text."""
    env = turn.env
    reply: ModelReply | None = None
    progress = ""
    request = turn.request()
    try:
        with env.watch.model_call(request):
            async with model_stream(env.model, request) as stream:
                async for event in stream:
                    if isinstance(event, TextDelta):
                        await env.sink.emit(
                            MessageDelta(
                                session=turn.session, turn_id=turn.turn_id, text=event.text
                            )
                        )
                        turn.checkpoint()
                    elif isinstance(event, ThinkingDelta):
                        progress = (progress + event.text)[-MAX_PROGRESS:]
                        await env.sink.emit(
                            ProgressUpdated(
                                session=turn.session,
                                turn_id=turn.turn_id,
                                index=turn.next_index,
                                text=progress,
                            )
                        )
                        turn.checkpoint()
                    elif isinstance(event, StreamRestart):
                        progress = ""
                        await env.sink.emit(
                            MessageDelta(
                                session=turn.session, turn_id=turn.turn_id, text="", restart=True
                            )
                        )
                    else:
                        reply = event
            if reply is None:
                env.watch.model_failed("ModelError")
                raise TurnFailure("ModelError: the model stream ended without a reply")
            env.watch.model_returned(reply)
    except (ModelError, TurnFailure, CancelTurn) as exc:
        if isinstance(exc, ModelError):
            raise TurnFailure(describe_error(exc, redact=env.redact)) from None
        raise
    except Exception as exc:
        log.exception("model adapter raised an unmapped error")
        error = ModelError(str(exc) or type(exc).__name__)
        raise TurnFailure(describe_error(error, redact=env.redact)) from None
    return reply
