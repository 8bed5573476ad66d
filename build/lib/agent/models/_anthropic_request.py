"""Turns the engine's transcript into a Messages API request body.

Three API rules shape this module. Roles must alternate, so every run of user-side messages (user
text, triggers, tool results) becomes one `user` message and a batch of tool results travels
together right after the `tool_use` blocks that asked for them. Prompt caching keys on an exact
prefix, so the system prompt, the tool list and the last block of the transcript each carry a
breakpoint, and the next step of the turn reads everything before its new messages from cache.
A cached prefix lives five minutes by default, less than a person takes to approve; a request
after which the turn may wait for one (`ModelRequest.may_wait`) writes its breakpoints with the
1-hour lifetime instead, all of them, since a 1-hour breakpoint may not follow a 5-minute one.
A context budget may leave old exchanges out, but only whole ones: a `tool_use` sent without its
`tool_result` (or the reverse) is a request the API refuses.

Two things the transcript keeps are not sent as they are. Thinking blocks are bound to the model
that wrote them on the families that bind it (`_families`, `thinking_bound`; see
https://platform.claude.com/docs/en/build-with-claude/preserved-thinking): a model of such a
family is sent only the thinking its own id wrote, never another model's or one of unknown
origin (stored before messages named their model), so a session survives a model change even
while a turn is parked. A family that does not bind thinking gets every block as stored: its
API reads the blocks it can and drops the rest without an error, and a tool-use loop there
wants its blocks echoed as received. And a turn the model refused (`stop_reason` "refusal") is
left out whole, the words that drew the refusal with it: the streaming-refusals doc
(https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals)
says to remove the turn that triggered it, since every request that re-sends it is refused
again. A turn is a contiguous run of messages opened by a user's or a trigger's, so leaving it
out keeps roles alternating and every `tool_use` with its `tool_result`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal, assert_never

from agent._messages import (
    AssistantMessage,
    CompactionBlock,
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    UserMessage,
)
from agent.models._families import family_of
from agent.seams import ToolSpec

Block = dict[str, Any]
Role = Literal["user", "assistant"]
ApiMessage = dict[str, Any]

DEFAULT_MODEL = "claude-sonnet-5-5"
"""The one default model, for the engine and the bot's settings alike: the current Sonnet on the
models overview (https://platform.claude.com/docs/en/about-claude/models/overview). It lives
here, not beside the adapter, so a host can read it without importing the SDK; it must be in the
installed SDK's `ModelParam` and not in its `DEPRECATED_MODELS` (a test checks)."""
DEFAULT_MAX_TOKENS = 4096
"""The output budget of the families that think only when asked (Claude 4 to 4.8); a family
that always thinks has its own, larger one (`ModelFamily.default_max_tokens`), used when no
setting names one."""
MIN_THINKING_BUDGET = 1024
"""The API's floor for a manual thinking budget (`budget_tokens`), as the SDK documents it."""

CACHE_BREAKPOINT: dict[str, str] = {"type": "ephemeral"}
LONG_CACHE_BREAKPOINT: dict[str, str] = {"type": "ephemeral", "ttl": "1h"}
"""The 1-hour lifetime (`CacheControlEphemeralParam.ttl`; writes cost 2x base input instead of
1.25x, reads the same 0.1x): what a prefix read again after an approval must be written with."""
CHARS_PER_TOKEN = 4
"""The context estimate: JSON characters of the request divided by four. It overestimates prose
a little and code a little less; a budget should leave headroom below the model's real window."""

_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})
_EMPTY_TEXT = "(empty message)"
REFUSAL = "refusal"


def estimate_tokens(value: object) -> int:
    """Rounded up, so a non-empty piece never costs nothing."""
    return -(-len(json.dumps(value, ensure_ascii=False)) // CHARS_PER_TOKEN)


def accepts_long_cache(model: str) -> bool:
    """Whether `model` takes the 1-hour cache lifetime: every Claude model that caches prompts
    does (each has a 1-hour write price). A name that is not a Claude model id (a gateway's own
    alias) gets the default lifetime, which every cache accepts."""
    return model.startswith("claude-")


def cache_breakpoint(*, long: bool) -> dict[str, str]:
    return dict(LONG_CACHE_BREAKPOINT if long else CACHE_BREAKPOINT)


def system_blocks(system: str, *, long_cache: bool = False) -> list[Block]:
    """An empty system prompt is left out: the API rejects an empty text block."""
    if not system:
        return []
    return [{"type": "text", "text": system, "cache_control": cache_breakpoint(long=long_cache)}]


def tool_params(tools: Sequence[ToolSpec], *, long_cache: bool = False) -> list[Block]:
    """The breakpoint on the last tool caches the whole list, which sits first in the prefix."""
    params: list[Block] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in tools
    ]
    if params:
        params[-1]["cache_control"] = cache_breakpoint(long=long_cache)
    return params


def message_params(
    messages: Sequence[Message], *, long_cache: bool = False, model: str | None = None
) -> list[ApiMessage]:
    """Alternating API messages, with a cache breakpoint on the transcript's last cacheable block.

    Consecutive messages of one side are merged (tool results then a user's words is one `user`
    message, tool results first as the API requires). An assistant message with no content, such
    as an `end_turn` with nothing said, is skipped: the API refuses an empty assistant message.
    `model` is the model the request goes to: it decides which thinking blocks go (see above);
    without it every block goes as stored. Refused turns are left out either way.
    """
    refused = refused_turns(messages)
    bound = model is not None and family_of(model).thinking_bound
    merged: list[tuple[Role, list[Block]]] = []
    for message in messages:
        if message.turn_id in refused:
            continue
        role, blocks = _role_and_blocks(
            message, own_thinking_only=bound and _foreign(message, model)
        )
        if not blocks:
            continue
        if merged and merged[-1][0] == role:
            merged[-1][1].extend(blocks)
        else:
            merged.append((role, blocks))
    params = [{"role": role, "content": blocks} for role, blocks in merged]
    _mark_last_block(params, cache_breakpoint(long=long_cache))
    return params


def bound_transcript(
    messages: Sequence[Message], budget: int | None, overhead: int = 0
) -> Sequence[Message]:
    """The newest whole exchanges whose estimate, plus `overhead`, fits `budget`.

    An exchange opens at a user or trigger message with no tool call awaiting its result, so
    dropping one never orphans a `tool_use` or a `tool_result`, and the first message kept is a
    user's. The newest exchange is always kept even if it alone is over budget: the request
    must carry the turn in progress, and the API's own limit is the judge of that. The stored
    transcript is not touched; only the request is shorter.
    """
    if budget is None:
        return messages
    exchanges = _exchanges(messages)
    costs = [sum(estimate_tokens(_role_and_blocks(m)[1]) for m in ex) for ex in exchanges]
    total = overhead + sum(costs)
    first = 0
    while total > budget and first < len(exchanges) - 1:
        total -= costs[first]
        first += 1
    if first == 0:
        return messages
    return [m for ex in exchanges[first:] for m in ex]


def _exchanges(messages: Sequence[Message]) -> list[list[Message]]:
    starts = open_exchanges(messages)
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    ends = [*starts[1:], len(messages)]
    return [
        list(messages[start:end]) for start, end in zip(starts, ends, strict=True) if end > start
    ]


def open_exchanges(messages: Sequence[Message]) -> list[int]:
    """The indexes where an exchange opens: a user or trigger message with no tool call
    awaiting its result. A request may start at any of them and be one the API accepts."""
    starts: list[int] = []
    awaiting: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage | TriggerMessage) and not awaiting:
            starts.append(index)
        if isinstance(message, AssistantMessage):
            awaiting |= {call.id for call in message.tool_calls}
        elif isinstance(message, ToolMessage):
            awaiting.discard(message.call_id)
    return starts


def refused_turns(messages: Sequence[Message]) -> frozenset[str]:
    """The turns whose model refused (one pass; usually none)."""
    return frozenset(
        m.turn_id for m in messages if isinstance(m, AssistantMessage) and m.stop_reason == REFUSAL
    )


def _foreign(message: Message, model: str | None) -> bool:
    """Whether `message` is an assistant message not written by `model` (or by no known one)."""
    return isinstance(message, AssistantMessage) and message.model != model


def _role_and_blocks(
    message: Message, *, own_thinking_only: bool = False
) -> tuple[Role, list[Block]]:
    """`own_thinking_only`: the message's thinking is another model's, so it stays out."""
    match message:
        case UserMessage() | TriggerMessage():
            return "user", [{"type": "text", "text": message.text or _EMPTY_TEXT}]
        case AssistantMessage():
            content = message.content
            if own_thinking_only:
                content = tuple(
                    b for b in content if not isinstance(b, ThinkingBlock | RedactedThinkingBlock)
                )
            return "assistant", [b for b in map(_content_block, content) if b is not None]
        case ToolMessage():
            return "user", [_tool_result(message)]
        case _:
            assert_never(message)


def _content_block(block: ContentBlock) -> Block | None:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text} if block.text else None
        case ToolCall():
            return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
        case ThinkingBlock():
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        case RedactedThinkingBlock():
            return {"type": "redacted_thinking", "data": block.data}
        case CompactionBlock():
            return compaction_param(block)
        case _:
            assert_never(block)


def compaction_param(block: CompactionBlock) -> Block:
    """The block as the API returned it: `content` always (null is a failed compaction, which
    the API reads as a no-op), the other fields only where they came back."""
    param: Block = {"type": "compaction", "content": block.content}
    if block.encrypted_content is not None:
        param["encrypted_content"] = block.encrypted_content
    if block.signature is not None:
        param["signature"] = block.signature
    if block.tool_changes is not None:
        param["tool_changes"] = [dict(change) for change in block.tool_changes]
    return param


def _tool_result(message: ToolMessage) -> Block:
    """The engine's note (a person's reason, an expiry) follows the result as a text block of
    its own, so the result the tool returned stays exactly what it returned."""
    result = message.result
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    content: str | list[Block] = text
    if message.note:
        content = [{"type": "text", "text": part} for part in (text, message.note) if part]
    block: Block = {"type": "tool_result", "tool_use_id": message.call_id, "content": content}
    if message.is_error:
        block["is_error"] = True
    return block


def _mark_last_block(params: list[ApiMessage], breakpoint: dict[str, str]) -> None:
    """Thinking blocks cannot carry a breakpoint, so the mark goes on the last one that can."""
    if not params:
        return
    for block in reversed(params[-1]["content"]):
        if block["type"] not in _UNCACHEABLE:
            block["cache_control"] = breakpoint
            return
