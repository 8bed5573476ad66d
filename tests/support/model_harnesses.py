"""One way to script every `Model` implementation, so one contract suite can run on all of them.

A test says what the next model calls answer (`Say`: text in chunks, tool calls, a stop reason)
or that one fails or restarts; each harness turns that into its implementation's own terms: a
`ScriptedReply`, server-sent events from the Anthropic stand-in, or the plain model's events.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from anthropic import AsyncAnthropic

from agent import (
    AnthropicModel,
    Model,
    ModelError,
    ScriptedModel,
    ScriptedReply,
    TextBlock,
    ToolCall,
)
from agent.seams import ContentBlock, ModelEvent, ModelReply, ModelRequest, StreamRestart, TextDelta
from bot.core.deferred_model import DeferredModel
from tests.support.anthropic_standin import (
    AnthropicStandin,
    ContentSpec,
    Text,
    ToolUse,
    http_error,
    sse_reply,
)
from tests.support.plain_model import PlainModel


@dataclass(frozen=True)
class Say:
    """One model call's answer: `chunks` streamed as text, then `calls`, then the stop."""

    chunks: Sequence[str] = ()
    calls: Sequence[ToolCall] = ()
    stop_reason: str | None = None

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    @property
    def stop(self) -> str:
        return self.stop_reason or ("tool_use" if self.calls else "end_turn")

    def reply(self) -> ModelReply:
        content: list[ContentBlock] = [TextBlock(text=self.text)] if self.text else []
        content += self.calls
        return ModelReply(content=tuple(content), stop_reason=self.stop)


class ModelHarness(Protocol):
    model: Model
    failure: str
    """Words the `ModelError` of a scripted failure carries, so a test can tell it is that one."""

    def say(self, *answers: Say) -> None:
        """The next calls answer these, in order."""
        ...

    def fail(self, answer: Say, *, after: int) -> None:
        """The next call breaks for good after `after` text chunks (or before any, where the
        implementation cannot fail mid-stream)."""
        ...


class RestartingHarness(ModelHarness, Protocol):
    def restart(self, answer: Say, *, after: int) -> None:
        """The next call breaks after `after` chunks and the adapter retries it once."""
        ...


class ScriptedHarness:
    """`ScriptedModel` answering calls in order (not by step, so a test scripts calls alone)."""

    failure = "refused by the script"

    def __init__(self) -> None:
        self._answers: deque[ScriptedReply | Exception] = deque()
        self.model = ScriptedModel(responder=self._respond)

    def _respond(self, request: ModelRequest, step: int) -> ScriptedReply:
        answer = self._answers.popleft() if self._answers else ModelError("nothing scripted")
        if isinstance(answer, Exception):
            raise answer
        return answer

    def say(self, *answers: Say) -> None:
        self._answers.extend(
            ScriptedReply(text=list(a.chunks), tool_calls=a.calls, stop_reason=a.stop)
            for a in answers
        )

    def fail(self, answer: Say, *, after: int) -> None:
        self._answers.append(ModelError(self.failure))


@dataclass
class AnthropicHarness:
    """`AnthropicModel` over the real SDK, against the Messages API stand-in, which holds each
    request to the rules of `model_id`'s family: "claude-test", an id no family owns, is read
    as the newest (and strictest) one; a legacy id runs the same contract on the old rules."""

    api: AnthropicStandin
    client: AsyncAnthropic
    model_id: str = "claude-test"
    model: AnthropicModel = field(init=False)
    failure: str = "invalid_request_error"

    def __post_init__(self) -> None:
        self.model = AnthropicModel(client=self.client, model=self.model_id, restart_delay=0)

    @staticmethod
    def _content(answer: Say) -> list[ContentSpec]:
        text: list[ContentSpec] = [Text(answer.text, chunks=answer.chunks)] if answer.text else []
        return [*text, *(ToolUse(c.id, c.name, c.input) for c in answer.calls)]

    def say(self, *answers: Say) -> None:
        self.api.enqueue(
            *(sse_reply(*self._content(a), stop_reason=a.stop_reason) for a in answers)
        )

    def fail(self, answer: Say, *, after: int) -> None:
        if after == 0:
            self.api.enqueue(http_error(400, "invalid_request_error", "refused"))
            return
        self.api.enqueue(
            sse_reply(*self._content(answer), fail_after=after, error_type="invalid_request_error")
        )

    def restart(self, answer: Say, *, after: int) -> None:
        content = self._content(answer)
        self.api.enqueue(
            sse_reply(*content, fail_after=after, error_type="overloaded_error"),
            sse_reply(*content, stop_reason=answer.stop_reason),
        )


@dataclass
class DeferredHarness(AnthropicHarness):
    """`DeferredModel` building `AnthropicModel` on the first call, as a web process that runs
    no turns does (`bot.core.deferred_model`): it must keep every promise of the model it wraps."""

    model: DeferredModel = field(init=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.model = DeferredModel(
            lambda: AnthropicModel(client=self.client, model=self.model_id, restart_delay=0)
        )


class PlainHarness:
    """`PlainModel`: a stream that is an `AsyncIterator` and nothing more."""

    failure = "refused by the plain model"

    def __init__(self) -> None:
        self.model = PlainModel()

    @staticmethod
    def _deltas(answer: Say) -> list[ModelEvent | Exception]:
        return [TextDelta(text=c) for c in answer.chunks]

    def say(self, *answers: Say) -> None:
        self.model.add(*([*self._deltas(a), a.reply()] for a in answers))

    def fail(self, answer: Say, *, after: int) -> None:
        self.model.add([*self._deltas(answer)[:after], ModelError(self.failure)])

    def restart(self, answer: Say, *, after: int) -> None:
        deltas = self._deltas(answer)
        self.model.add([*deltas[:after], StreamRestart(reason="retried"), *deltas, answer.reply()])
