"""A deterministic model for tests and the offline demo.

Replies are chosen by position, not by call count: the n-th model step of a turn gets the n-th
scripted reply, counted off the request's transcript. A fresh process replaying a half-finished
turn therefore gets exactly the reply the crashed one would have, which is what crash tests need.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agent._errors import ModelError
from agent._messages import (
    AssistantMessage,
    CompactionBlock,
    ContentBlock,
    JsonData,
    Message,
    TextBlock,
    ToolCall,
    TriggerMessage,
    Usage,
    UserMessage,
)
from agent.seams import ModelEvent, ModelReply, ModelRequest, ModelSettings, TextDelta


@dataclass(frozen=True, kw_only=True)
class ScriptedReply:
    """One model step: text (streamed as the given chunks), tool calls, and a stop reason."""

    text: str | Sequence[str] = ""
    tool_calls: Sequence[ToolCall | tuple[str, str, Mapping[str, JsonData]]] = ()
    """`ToolCall`s, or `(call id, tool name, input)` triples."""
    stop_reason: str | None = None
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=10, output_tokens=5))
    model: str | None = None
    """The model the reply says wrote it; by default the one the request names, if any."""
    stop_explanation: str | None = None
    compaction: str | None = None
    """The API's summary of the thread so far, put first in the reply as a compaction block
    (as the API answers a request that passed its trigger)."""

    def chunks(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    def reply(self) -> ModelReply:
        content: list[ContentBlock] = []
        if self.compaction is not None:
            content.append(CompactionBlock(content=self.compaction))
        text = "".join(self.chunks())
        if text:
            content.append(TextBlock(text=text))
        for call in self.tool_calls:
            content.append(
                call
                if isinstance(call, ToolCall)
                else ToolCall(id=call[0], name=call[1], input=dict(call[2]))
            )
        stop = self.stop_reason or ("tool_use" if self.tool_calls else "end_turn")
        return ModelReply(
            content=tuple(content),
            stop_reason=stop,
            usage=self.usage,
            model=self.model,
            stop_explanation=self.stop_explanation,
        )


Responder = Callable[[ModelRequest, int], ScriptedReply]


def step_in_turn(messages: Sequence[Message]) -> int:
    """How many model steps this turn already took: assistant messages since its opening."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, UserMessage | TriggerMessage):
            break
        if isinstance(message, AssistantMessage):
            count += 1
    return count


def turn_in_session(messages: Sequence[Message]) -> int:
    """Which turn of the session this is (0 for the first): openings before the last. Counted
    in the session's current generation, so a reset starts the count again."""
    return sum(isinstance(m, UserMessage | TriggerMessage) for m in messages) - 1


def opening_text(messages: Sequence[Message]) -> str:
    for message in reversed(messages):
        if isinstance(message, UserMessage | TriggerMessage):
            return message.text
    return ""


class ScriptedModel:
    """`ScriptedModel([reply0, reply1, ...])` (every turn), a whole session with
    `turns=[[turn0 replies], [turn1 replies], ...]`, per opening text with `by_opening`, or any
    function of (request, step) with `responder`. Records every request it was sent in `requests`.
    """

    def __init__(
        self,
        replies: Sequence[ScriptedReply] = (),
        *,
        turns: Sequence[Sequence[ScriptedReply]] | None = None,
        by_opening: Mapping[str, Sequence[ScriptedReply]] | None = None,
        responder: Responder | None = None,
        delta_delay: float = 0.0,
        keep_requests: bool = True,
        compacts_context: bool = False,
    ) -> None:
        """`keep_requests=False` for a long run (a benchmark, the demo server): `requests` then
        stays empty instead of holding every transcript the model was shown.
        `compacts_context=True` plays a model whose API compacts long threads (the `Model`
        seam's optional capability), so the runtime shows it the thread since its newest
        compaction block rather than a window; script the block with `ScriptedReply.compaction`."""
        if turns is not None and replies:
            raise ValueError("give the replies of every turn or the turns of a session, not both")
        self._keep_requests = keep_requests
        self._replies = list(replies)
        self._turns = [list(t) for t in turns] if turns is not None else None
        self._by_opening = {k: list(v) for k, v in (by_opening or {}).items()}
        self._responder = responder
        self._delta_delay = delta_delay
        self._compacts = compacts_context
        self.requests: list[ModelRequest] = []

    def compacts_context(self, settings: ModelSettings) -> bool:
        return self._compacts

    def _pick(self, request: ModelRequest) -> ScriptedReply:
        step = step_in_turn(request.messages)
        if self._responder is not None:
            return self._responder(request, step)
        script = self._by_opening.get(opening_text(request.messages), self._replies)
        if self._turns is not None and opening_text(request.messages) not in self._by_opening:
            turn = turn_in_session(request.messages)
            if turn >= len(self._turns):
                raise ModelError(f"scripted model has no script for turn {turn} of this session")
            script = self._turns[turn]
        if step >= len(script):
            raise ModelError(f"scripted model has no reply for step {step} of this turn")
        return script[step]

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self._keep_requests:
            self.requests.append(request)
        scripted = self._pick(request)
        for chunk in scripted.chunks():
            if not chunk:
                continue
            if self._delta_delay:
                await asyncio.sleep(self._delta_delay)
            yield TextDelta(text=chunk)
        reply = scripted.reply()
        if reply.model is None and request.settings.model:
            reply = reply.model_copy(update={"model": request.settings.model})
        yield reply
