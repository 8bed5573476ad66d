"""The model seam: `Model.stream(request)` and the shapes it takes and yields."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

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


class StreamRestart(_Frozen):
    """The adapter retried the call: text streamed so far is void."""

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


ModelEvent = TextDelta | StreamRestart | ModelReply


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
        passed through. The loop may stop reading at any point (a cancel between deltas): it
        then calls the iterator's `aclose()` if it has one, as an async generator does, so an
        adapter holding a connection should be one; a plain `AsyncIterator` is just dropped.
        """
        ...


def model_compacts(model: Model, settings: ModelSettings) -> bool:
    """The optional `compacts_context` of `model` (see `Model`), False where it has none: a
    model written to the Protocol alone keeps the window it always had."""
    compacts = getattr(model, "compacts_context", None)
    return bool(compacts(settings)) if callable(compacts) else False
