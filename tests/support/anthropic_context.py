"""The stand-in's context management (beta): what the API refuses about it, and what it does.

Refused (400), each as the page cited at the rule says:
- a body field only the beta `messages.create` takes, without an `anthropic-beta` header; a
  `context_management` edit without the beta its page names, or one the model's family does
  not take (`agent.models._families`); a compaction trigger below its 50,000-token floor;
- a `compaction` block without the compaction beta, outside an assistant message or not first
  in it (`compaction_block_misplaced`), two with content (`compaction_block_ambiguous`), or
  one whose content or signature is not what was returned (`compaction_content_mismatch`,
  `compaction_signature_invalid`): the error codes are the installed SDK's;
- input over the model family's context window ("prompt is too long").

Done: the API reads a request from its compaction block onward; past the compaction trigger
it answers with a new compaction block first, then the reply; past the tool-clearing trigger
it reports what it cleared in `context_management.applied_edits`; and a reply whose output
would pass the window stops with `model_context_window_exceeded`.

Tokens are estimated (four characters of JSON a token), as the cache rules' are.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from anthropic.resources.beta.messages import AsyncMessages as AsyncBetaMessages
from anthropic.resources.messages import AsyncMessages
from starlette.responses import JSONResponse, Response

from agent.models._families import family_of

Event = tuple[str, dict[str, Any]]

COMPACTION_DOC = "https://platform.claude.com/docs/en/build-with-claude/compaction-threshold"
EDITING_DOC = "https://platform.claude.com/docs/en/build-with-claude/context-editing"
STOP_DOC = "https://platform.claude.com/docs/en/build-with-claude/handling-stop-reasons"

_NOT_BODY = frozenset({"self", "extra_headers", "extra_query", "extra_body", "timeout", "betas"})
PLAIN_FIELDS = frozenset(inspect.signature(AsyncMessages.create).parameters) - _NOT_BODY
BETA_FIELDS = frozenset(inspect.signature(AsyncBetaMessages.create).parameters) - _NOT_BODY
COUNT_FIELDS = frozenset(inspect.signature(AsyncMessages.count_tokens).parameters) - _NOT_BODY
BETA_COUNT_FIELDS = (
    frozenset(inspect.signature(AsyncBetaMessages.count_tokens).parameters) - _NOT_BODY
)

# Each edit's beta header and defaults, from its page (COMPACTION_DOC, EDITING_DOC).
EDIT_BETAS = {
    "compact_20260112": "compact-2026-01-12",
    "clear_tool_uses_20250919": "context-management-2025-06-27",
    "clear_thinking_20251015": "context-management-2025-06-27",
}
COMPACT_DEFAULT_TRIGGER = 150_000
COMPACT_MIN_TRIGGER = 50_000
CLEAR_DEFAULT_TRIGGER = 100_000
CLEAR_DEFAULT_KEEP = 3
CLEARED_PLACEHOLDER = "[tool result cleared]"
_SECRET = b"stand-in compaction key"


@dataclass(frozen=True)
class Refusal:
    message: str
    code: str | None = None
    """`error.details.error_code`, which the SDK maps to its error class."""

    def response(self) -> Response:
        error: dict[str, Any] = {"type": "invalid_request_error", "message": self.message}
        if self.code is not None:
            error["details"] = {"error_code": self.code}
        body = {"type": "error", "error": error, "request_id": "req_standin"}
        return JSONResponse(body, status_code=400, headers={"x-should-retry": "false"})


def betas_of(headers: Mapping[str, str]) -> set[str]:
    return {b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()}


def sign(content: str) -> str:
    return hashlib.sha256(_SECRET + content.encode()).hexdigest()


def field_problem(body: dict[str, Any], betas: set[str], *, counting: bool = False) -> str | None:
    """The plain signature's fields always; the beta signature's only with a beta header (the
    API version the SDK pins refuses them otherwise)."""
    plain, beta = (COUNT_FIELDS, BETA_COUNT_FIELDS) if counting else (PLAIN_FIELDS, BETA_FIELDS)
    for key in body:
        if key in plain or (betas and key in beta):
            continue
        return f"{key}: Extra inputs are not permitted"
    return None


def context_problem(body: dict[str, Any], headers: Mapping[str, str]) -> Refusal | None:
    betas = betas_of(headers)
    problem = field_problem(body, betas)
    if problem is not None:
        return Refusal(problem)
    edits = (body.get("context_management") or {}).get("edits") or []
    takes = family_of(str(body.get("model", ""))).context_edits
    for i, edit in enumerate(edits):
        kind = edit.get("type")
        where = f"context_management.edits.{i}"
        if kind not in EDIT_BETAS:
            return Refusal(f"{where}.type: Input tag {kind!r} does not match any expected tag")
        if EDIT_BETAS[kind] not in betas:  # EDITING_DOC, COMPACTION_DOC: "beta header"
            return Refusal(f"{where}: {kind} requires the anthropic-beta header {EDIT_BETAS[kind]}")
        if kind not in takes:  # the family table's supported models
            return Refusal(f"{where}: {kind} is not supported on model {body.get('model')}")
        trigger = edit.get("trigger")
        if kind == "compact_20260112" and trigger is not None:
            # COMPACTION_DOC, parameters: trigger is input_tokens, at least 50,000
            if trigger.get("type") != "input_tokens":
                return Refusal(f"{where}.trigger.type: Input should be 'input_tokens'")
            if int(trigger.get("value", 0)) < COMPACT_MIN_TRIGGER:
                return Refusal(
                    f"{where}.trigger.value: Input should be greater than or equal to "
                    f"{COMPACT_MIN_TRIGGER}"
                )
    return _compaction_block_problem(body, betas)


def _compaction_block_problem(body: dict[str, Any], betas: set[str]) -> Refusal | None:
    """COMPACTION_DOC and the SDK's compaction_* error types: a block sent back is the one
    returned last, unchanged, first in its assistant message."""
    with_content = 0
    for i, message in enumerate(body.get("messages", [])):
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        for j, block in enumerate(blocks):
            if block.get("type") != "compaction":
                continue
            where = f"messages.{i}.content.{j}"
            if EDIT_BETAS["compact_20260112"] not in betas:
                return Refusal(f"{where}.type: Input tag 'compaction' does not match any tag")
            if message.get("role") != "assistant" or j != 0:
                return Refusal(
                    f"{where}: a compaction block must open an assistant message",
                    "compaction_block_misplaced",
                )
            if block.get("content") is None:
                continue  # a failed compaction: the API reads it as a no-op
            with_content += 1
            if with_content > 1:
                return Refusal(
                    f"{where}: more than one compaction block with content",
                    "compaction_block_ambiguous",
                )
            signature = block.get("signature")
            if not isinstance(signature, str) or len(signature) != 64:
                return Refusal(
                    f"{where}.signature: does not verify", "compaction_signature_invalid"
                )
            if signature != sign(block["content"]):
                return Refusal(
                    f"{where}.content: differs from what its signature recorded",
                    "compaction_content_mismatch",
                )
    return None


def read_from_compaction(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages the API reads: from the compaction block onward (COMPACTION_DOC: the
    blocks before it are dropped)."""
    messages: list[dict[str, Any]] = body.get("messages", [])
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].get("content")
        if isinstance(content, list) and any(
            b.get("type") == "compaction" and b.get("content") is not None for b in content
        ):
            return messages[i:]
    return messages


def input_tokens(body: dict[str, Any]) -> int:
    return tokens_of([body.get("system", []), body.get("tools", []), read_from_compaction(body)])


def tokens_of(value: object) -> int:
    """Four characters of JSON a token, and about one more for each character outside ASCII (a
    Japanese character is a token or more), so the adapter's characters / 4 estimate is not
    what the stand-in counts: the count is the API's to give."""
    text = json.dumps(value, ensure_ascii=False)
    return -(-len(text) // 4) + (len(text.encode()) - len(text)) // 2


def window_refusal(body: dict[str, Any]) -> Refusal | None:
    """Input alone over the window is refused before any generation (STOP_DOC: the stop
    reason is for a response that fills the window, not for a prompt that is already over)."""
    window = family_of(str(body.get("model", ""))).context_window
    tokens = input_tokens(body)
    if tokens > window:
        return Refusal(f"prompt is too long: {tokens} tokens > {window} maximum")
    return None


def apply_context(body: dict[str, Any], events: list[Event]) -> list[Event]:
    """The scripted reply as the API would send it for this request."""
    tokens = input_tokens(body)
    edits = (body.get("context_management") or {}).get("edits") or []
    applied: list[dict[str, Any]] = []
    for edit in edits:
        if edit["type"] == "compact_20260112":
            trigger = (edit.get("trigger") or {}).get("value", COMPACT_DEFAULT_TRIGGER)
            if tokens >= trigger:
                events = _with_compaction(events, body)
        elif edit["type"] == "clear_tool_uses_20250919":
            cleared = _cleared_tool_uses(body, edit, tokens)
            if cleared is not None:
                applied.append(cleared)
    window = family_of(str(body.get("model", ""))).context_window
    out: list[Event] = []
    for name, data in events:
        if name == "message_delta":
            delta = dict(data["delta"])
            if tokens + int(data.get("usage", {}).get("output_tokens", 0)) > window:
                delta["stop_reason"] = "model_context_window_exceeded"  # STOP_DOC
            data = {**data, "delta": delta}
            if edits:
                data["context_management"] = {"applied_edits": applied}
        out.append((name, data))
    return out


def _with_compaction(events: list[Event], body: dict[str, Any]) -> list[Event]:
    """A compaction block at index 0, the scripted blocks after it."""
    read = read_from_compaction(body)
    summary = f"Summary of {len(read)} earlier messages (stand-in)."
    start = {
        "type": "compaction",
        "content": None,
        "signature": sign(summary),
        "tool_changes": [],
    }
    added: list[Event] = [
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {
                    "type": "compaction_delta",
                    "content": summary,
                    "encrypted_content": None,
                },
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]
    out: list[Event] = []
    for name, data in events:
        if name.startswith("content_block_") or name == "message_delta":
            out.extend(added)
            added = []
        if name.startswith("content_block_"):
            data = {**data, "index": data["index"] + 1}
        out.append((name, data))
    return out


def _cleared_tool_uses(
    body: dict[str, Any], edit: dict[str, Any], tokens: int
) -> dict[str, Any] | None:
    """EDITING_DOC: past the trigger, the oldest tool results beyond the `keep` newest are
    replaced with a placeholder, and the response says how many and how many tokens."""
    trigger = (edit.get("trigger") or {}).get("value", CLEAR_DEFAULT_TRIGGER)
    keep = (edit.get("keep") or {}).get("value", CLEAR_DEFAULT_KEEP)
    if tokens < trigger:
        return None
    results = [b for b in _blocks(read_from_compaction(body)) if b.get("type") == "tool_result"]
    old = results[: max(len(results) - keep, 0)]
    if not old:
        return None
    cleared = sum(-(-len(json.dumps(b.get("content", ""))) // 4) for b in old)
    return {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": len(old),
        "cleared_input_tokens": cleared,
    }


def _blocks(messages: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            yield from content


def count_tokens_problem(body: dict[str, Any], headers: Mapping[str, str]) -> Refusal | None:
    """`/v1/messages/count_tokens` takes the SDK's `count_tokens` fields (no `max_tokens`, no
    `stream`), and the same context rules."""
    for key in ("model", "messages"):
        if key not in body:
            return Refusal(f"{key}: Field required")
    problem = field_problem(body, betas_of(headers), counting=True)
    if problem is not None:
        return Refusal(problem)
    return context_problem({**body, "max_tokens": 1}, headers)


def token_count(body: dict[str, Any]) -> dict[str, Any]:
    count: dict[str, Any] = {"input_tokens": input_tokens(body)}
    if body.get("context_management"):
        whole = [body.get("system", []), body.get("tools", []), body.get("messages", [])]
        count["context_management"] = {"original_input_tokens": tokens_of(whole)}
    return count
