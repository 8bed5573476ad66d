"""Reads what the Messages API returned, or how it failed, back into the engine's terms.

A reply's stop reason decides whether the step may commit: a normal stop always may, while an
abnormal one (max_tokens, or any reason this code has not met yet) may only if the model said
something, because committing an empty reply would leave the user with silence and no error,
and never if it holds a tool call. Two stops are neither: a `refusal` always commits (empty or
not, its tool calls dropped, since none may run), because the engine must record the refused
exchange to leave it out of later requests and tell the user; a `pause_turn` commits even empty,
because the turn goes on (the engine sends it back for the model to continue).

When generation stopped before the model finished, a call may be missing the end of its input,
and the SDK parses half-sent JSON leniently: `{"amount_cents": 100` cut from `100000` reads as
a whole, valid input. Running it could do the wrong thing. Continuing the generation is no way
out: a prefill cannot reopen a half-written tool_use block, and newer models refuse prefill
altogether. So the step fails, and its error says which limit to raise.

Errors become `ModelError`s whose message is one line a person can act on: no SDK traceback, no
request headers, so never the API key.
"""

from __future__ import annotations

import anthropic
import httpx2
from anthropic import types as api
from anthropic.types import beta

from agent._errors import AbnormalStopError, ModelError
from agent._messages import (
    CompactionBlock,
    ContentBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
)
from agent.seams import ModelReply

NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence"})
REFUSAL = "refusal"
PAUSE_TURN = "pause_turn"
RESTARTABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
_MAX_DETAIL = 300
_EMPTY_STOP_HINTS = {
    "model_context_window_exceeded": (
        ": the conversation filled the model's context window (turn on "
        "ANTHROPIC_CONTEXT_MANAGEMENT, lower ANTHROPIC_MAX_CONTEXT_TOKENS, or reset the thread)"
    ),
}


class StreamCutError(Exception):
    """The stream ended without `message_stop`: the reply may be missing its tail."""


def to_reply(
    message: api.Message | beta.BetaMessage, *, max_tokens: int, max_tokens_from: str
) -> ModelReply:
    """Raises `AbnormalStopError` instead of returning an abnormal stop that is empty or holds
    tool calls; `max_tokens_from` names the setting to raise when the cut was max_tokens."""
    content = tuple(b for b in map(_content_block, message.content) if b is not None)
    stop_reason = message.stop_reason or "unknown"
    explanation = None
    if stop_reason == REFUSAL:
        content = tuple(b for b in content if not isinstance(b, ToolCall))
        details = message.stop_details
        explanation = details.explanation if details is not None else None
    elif stop_reason not in NORMAL_STOPS:
        calls = [b.name for b in content if isinstance(b, ToolCall)]
        if calls:
            raise AbnormalStopError(
                _cut_calls(stop_reason, calls, max_tokens=max_tokens, where=max_tokens_from)
            )
        if stop_reason != PAUSE_TURN and not _says_something(content):
            raise AbnormalStopError(
                f"the model stopped ({stop_reason}) with an empty reply"
                + _EMPTY_STOP_HINTS.get(stop_reason, "")
            )
    return ModelReply(
        content=content,
        stop_reason=stop_reason,
        usage=to_usage(message.usage),
        model=message.model or None,
        stop_explanation=explanation,
    )


def _cut_calls(stop_reason: str, calls: list[str], *, max_tokens: int, where: str) -> str:
    """Names the calls (never their input, which may hold what the user typed)."""
    names = ", ".join(calls)
    stopped = (
        f"the model's reply was cut off at max_tokens ({max_tokens})"
        if stop_reason == "max_tokens"
        else f"the model stopped ({stop_reason})"
    )
    text = (
        f"{stopped} in the middle of a tool call ({names}); no call was run, since its input "
        "may be incomplete."
    )
    if stop_reason == "max_tokens":
        text += f" Raise max_tokens ({where})."
    return text


def to_usage(usage: api.Usage | beta.BetaUsage) -> Usage:
    return Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens or 0,
        cache_write_tokens=usage.cache_creation_input_tokens or 0,
    )


def is_restartable(err: Exception) -> bool:
    """Whether a stream that broke after it began is worth sending again.

    Only failures of the service or the wire qualify; a 4xx-type error event would fail again.
    """
    if isinstance(err, anthropic.APIStatusError):
        return err.type in RESTARTABLE_ERROR_TYPES or err.status_code >= 500
    return isinstance(err, anthropic.APIConnectionError | httpx2.TransportError | StreamCutError)


def describe(err: Exception) -> str:
    """One short line for a `ModelError`; the SDK's own message embeds the whole error body."""
    match err:
        case anthropic.APITimeoutError():
            text = "the Anthropic API timed out"
        case anthropic.APIConnectionError() | httpx2.TransportError():
            text = "the connection to the Anthropic API failed"
        case anthropic.APIStatusError():
            where = f"HTTP {err.status_code}" if err.status_code >= 400 else "mid-stream"
            kind = f" {err.type}" if err.type else ""
            detail = f": {err.api_message}" if err.api_message else ""
            request = f" (request {err.request_id})" if err.request_id else ""
            text = f"Anthropic API error, {where}{kind}{detail}{request}"
        case StreamCutError():
            text = "the Anthropic stream ended before the message was complete"
        case _:
            text = f"the Anthropic reply could not be read: {type(err).__name__}: {err}"
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"


def _content_block(block: object) -> ContentBlock | None:
    """Server-side tool blocks are never requested by this adapter, so they are not kept. A
    reply read through the beta endpoint (context management) has the beta classes of the
    same blocks, and may open with a compaction block, which is kept whole."""
    match block:
        case api.TextBlock() | beta.BetaTextBlock():
            return TextBlock(text=block.text) if block.text else None
        case api.ToolUseBlock() | beta.BetaToolUseBlock():
            if not isinstance(block.input, dict):
                raise ModelError(f"the model sent tool input that is not an object ({block.name})")
            return ToolCall(id=block.id, name=block.name, input=block.input)
        case api.ThinkingBlock() | beta.BetaThinkingBlock():
            return ThinkingBlock(thinking=block.thinking, signature=block.signature)
        case api.RedactedThinkingBlock() | beta.BetaRedactedThinkingBlock():
            return RedactedThinkingBlock(data=block.data)
        case beta.BetaCompactionBlock():
            changes = block.tool_changes
            return CompactionBlock(
                content=block.content,
                encrypted_content=block.encrypted_content,
                signature=block.signature,
                tool_changes=None
                if changes is None
                else tuple(
                    change.model_dump(mode="json", exclude_unset=True) for change in changes
                ),
            )
        case _:
            return None


def _says_something(content: tuple[ContentBlock, ...]) -> bool:
    """Thinking alone does not count: the user sees none of it."""
    return any(
        isinstance(b, ToolCall) or (isinstance(b, TextBlock) and b.text.strip()) for b in content
    )
