"""The transcript's vocabulary: messages and their content blocks.

The loop's position is read off the transcript, so these types carry exactly what replay needs:
which turn wrote a message, which tool calls an assistant message made, which call a tool result
answers. They are pydantic models so the storage boundary can serialise them without a registry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

JsonValue = Any
"""A value that round-trips through JSON (what tools return and steps store)."""

JsonData: TypeAlias = (
    str | int | float | bool | Sequence["JsonData"] | Mapping[str, "JsonData"] | None
)
"""`JsonValue` as the host API states it: JSON data, checked by the type checker. Containers are
read-only, so a `dict[str, str]` or a `list[int]` is one too."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextBlock(_Frozen):
    kind: Literal["text"] = "text"
    text: str


class ToolCall(_Frozen):
    kind: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, JsonValue]


class ThinkingBlock(_Frozen):
    """Kept verbatim (with its signature) because the provider requires it echoed on replay."""

    kind: Literal["thinking"] = "thinking"
    thinking: str
    signature: str


class RedactedThinkingBlock(_Frozen):
    kind: Literal["redacted_thinking"] = "redacted_thinking"
    data: str


class CompactionBlock(_Frozen):
    """The API's summary of the conversation before it (server-side compaction), kept exactly as
    it arrived: the API verifies its signature and reads the conversation from it onward, so
    every later request (on any worker, after any replay) must send it back unchanged to get
    the same prefix, and the same cache hits. `None` fields were absent and are not sent."""

    kind: Literal["compaction"] = "compaction"
    content: str | None
    encrypted_content: str | None = None
    signature: str | None = None
    tool_changes: tuple[dict[str, JsonValue], ...] | None = None


ContentBlock = Annotated[
    TextBlock | ToolCall | ThinkingBlock | RedactedThinkingBlock | CompactionBlock,
    Field(discriminator="kind"),
]


class Usage(_Frozen):
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
        )


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    turn_id: str
    text: str
    by: str | None = None


class TriggerMessage(_Frozen):
    """An opening no human typed (a schedule, a confirmation): attributed to what fired it."""

    role: Literal["trigger"] = "trigger"
    turn_id: str
    text: str
    by: str
    kind: str


def _unless_none(value: object) -> bool:
    return value is None


class AssistantMessage(_Frozen):
    role: Literal["assistant"] = "assistant"
    turn_id: str
    content: tuple[ContentBlock, ...]
    stop_reason: str
    usage: Usage = Usage()
    model: str | None = Field(default=None, exclude_if=_unless_none)
    """The model that wrote the message, as the API named it. Thinking blocks are bound to the
    model that wrote them: a session that outlives a model change (a deploy while a turn is
    parked) must send each model only its own, so the adapter reads this to choose. None for a
    message stored before it was recorded, or written by a model that names none; left out of
    the stored JSON then, so those messages read and write as they always did."""

    @property
    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCall))


class ToolMessage(_Frozen):
    role: Literal["tool"] = "tool"
    turn_id: str
    call_id: str
    name: str
    result: JsonValue
    is_error: bool = False
    note: str | None = Field(default=None, exclude_if=_unless_none)
    """What the engine adds to the result for the model: the reason a person gave with an
    answer the call read, or that a request it made expired. The engine adds it, not the tool,
    so the model reads it whatever the tool returns. Left out of the stored JSON when None, so
    messages stored before it existed read and write the same."""


Message = Annotated[
    UserMessage | TriggerMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]

_message_adapter: TypeAdapter[Message] = TypeAdapter(Message)


def holds_compaction(message: Message) -> bool:
    """Whether the API's summary of the thread before it is in this message (a compaction block
    with content; one without summarises nothing). A request is sent from the turn holding the
    newest such message, so stores mark it when they save it: finding it must not mean reading
    the transcript."""
    return isinstance(message, AssistantMessage) and any(
        isinstance(block, CompactionBlock) and block.content is not None
        for block in message.content
    )


def message_to_json(message: Message) -> str:
    return message.model_dump_json()


def message_from_json(raw: str | bytes) -> Message:
    return _message_adapter.validate_json(raw)


class TranscriptView(Sequence[Message]):
    """The first `length` messages of an append-only transcript, without copying it.

    A model step hands the model the whole conversation; copying ten thousand messages into a
    tuple on every step would make a step's cost grow with the conversation. The transcript is
    only ever appended to (a reset starts a new list), so a prefix view is a stable snapshot.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Message], length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...

    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return self._items[: self._length][index]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("transcript index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._length):
            yield items[i]

    def __reversed__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._length - 1, -1, -1):
            yield items[i]

    def __repr__(self) -> str:
        return f"TranscriptView({self._length} messages)"
