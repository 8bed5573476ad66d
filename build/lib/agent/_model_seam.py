"""The model seam: `Model.stream(request)` and the shapes it takes and yields."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from agent._messages import ContentBlock, Message, Usage


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(_Frozen):
    name: str
    description: str
    input_schema: dict[str, Any]


class ModelSettings(_Frozen):
    model: str | None = None
    max_tokens: int = 1024
    temperature: float | None = None
    """Honoured only by adapters whose API takes it. `AnthropicModel` sends none: the installed
    `anthropic` SDK's Messages API has no temperature parameter. It logs a warning instead."""
    thinking: bool = False
    """Honoured only where set explicitly; unset, the model's own default applies (off up to
    Claude 4.8, on from Claude 5). Off on a model whose thinking is always on does nothing."""
    effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None
    """`output_config.effort`: how much the model thinks and writes, on models that take it;
    unset, the adapter's own (ANTHROPIC_EFFORT), else the model's default."""
    thinking_display: Literal["summarized", "omitted"] | None = None
    """Whether the model's thinking comes back as text ("summarized") or empty ("omitted"),
    where its API takes the choice; None leaves it to the adapter's own default. Newer models
    write what they say between tool calls into thinking, so "omitted" silences that progress.
    Adapters stream the text as `ThinkingDelta`s: progress to show, never the reply."""


@dataclass(frozen=True, kw_only=True)
class ModelRequest:
    """A plain dataclass, not pydantic: it wraps the whole transcript, and re-validating ten
    thousand messages on every model step would make a step's cost grow with the transcript."""

    system: str
    messages: Sequence[Message]
    """A snapshot of the transcript (an immutable prefix view, never copied per step)."""
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    may_wait: bool = False
    """A tool on offer may leave the turn waiting for a person (a park, a proposed write), so
    the next call may come long after this one: an adapter with a prompt cache should keep
    what this call writes for longer than its default (Anthropic: the 1-hour lifetime)."""


class TextDelta(_Frozen):
    text: str


class ThinkingDelta(_Frozen):
    """Progress the model shows while it works (its summarized thinking, where newer models put
    what they say between tool calls). Live only: never the model's words, never part of the
    reply's text, never persisted. A consumer that shows nothing of it may ignore it."""

    text: str


class StreamRestart(_Frozen):
    """The adapter retried the call: text (and progress) streamed so far is void."""

    reason: str = ""


class ModelReply(_Frozen):
    content: tuple[ContentBlock, ...]
    stop_reason: str
    usage: Usage = Usage()
    model: str | None = None
    """The model that answered (the API's `message.model`), stored on the assistant message so
    a later request can tell its thinking from another model's; None when the adapter has no
    name for it."""
    stop_explanation: str | None = None
    """Why the API stopped, in words a user may read (a refusal's `stop_details.explanation`);
    None when it gave none."""


ModelEvent = TextDelta | ThinkingDelta | StreamRestart | ModelReply


class Model(Protocol):
    """Optional, beside `stream`: `compacts_context(settings: ModelSettings) -> bool`, whether
    the API behind the model compacts a long thread itself for a request with these settings
    (it summarises the thread into a compaction block, stored in the reply, from which every
    later request is read). The runtime then loads a session from the turn holding its newest
    compaction, however long ago, instead of its latest `context_messages` messages: a window
    would cut, and forget, what the API would have summarised. It must answer at once, without
    I/O. A model without it keeps the window (`model_compacts`)."""

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Stream text deltas, then exactly one `ModelReply`, last; raise `ModelError` on failure.

        The turn loop relies on this (`tests/contract/test_model.py` holds the contract): the
        deltas after the last `StreamRestart` spell the reply's text; `StreamRestart` comes only
        before the reply; tool calls are `ToolCall` blocks of the reply, with the stop reason
        passed through. `ThinkingDelta`s may come among the deltas: progress, which spells no
        part of the reply's text; an adapter without thinking yields none. The loop may stop
        reading at any point (a cancel between deltas): it then calls the iterator's `aclose()`
        if it has one, as an async generator does, so an adapter holding a connection should be
        one; a plain `AsyncIterator` is just dropped.
        """
        ...


def model_compacts(model: Model, settings: ModelSettings) -> bool:
    """The optional `compacts_context` of `model` (see `Model`), False where it has none: a
    model written to the Protocol alone keeps the window it always had."""
    compacts = getattr(model, "compacts_context", None)
    return bool(compacts(settings)) if callable(compacts) else False
