"""A local stand-in for Anthropic's Messages API, so tests drive the real SDK over real HTTP.

Tests queue what the next calls answer (a streamed message, an HTTP error, a stream that breaks
with an `error` event) and read back every request body the SDK sent. The stand-in also checks
the request rules the real API enforces and answers 400 where it would, so a malformed request
fails the test that made it. A body field that the installed SDK's `messages.create` does not
take is refused as the API version it pins refuses it ("<field>: Extra inputs are not
permitted"); the accepted set is read off the SDK's signature, so it follows SDK upgrades. It is
stricter than the API in one place on purpose: roles must strictly alternate, so an adapter that
forgets to batch tool results is caught here. Prompt caching follows the API's rules
(`tests.support.anthropic_cache`) on the stand-in's own clock, which a test moves with
`advance(seconds)`: what a reply reports as read from or written to the cache is what those
rules give, unless the test scripts the numbers itself.

    with AnthropicStandin() as api:
        api.enqueue(sse_reply(Text("Hello")))
        client = AsyncAnthropic(base_url=api.base_url, api_key="test-key")
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from anthropic.resources.messages import AsyncMessages
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.core.asgi_server import BackgroundServer
from tests.support.anthropic_cache import PromptCache, cache_control_problem
from tests.support.anthropic_context import (
    BETA_FIELDS,
    apply_context,
    context_problem,
    count_tokens_problem,
    token_count,
    window_refusal,
)
from tests.support.anthropic_display import display_problem, displayed
from tests.support.anthropic_rules import family_problem
from tests.support.anthropic_signatures import binding_problem, signed_events

Event = tuple[str, dict[str, Any]]

TRANSPORT_ARGUMENTS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout", "betas"})
"""Arguments of the SDK's methods that shape the HTTP call rather than name a body field."""
ACCEPTED_FIELDS = frozenset(inspect.signature(AsyncMessages.create).parameters) - {
    "self",
    *TRANSPORT_ARGUMENTS,
}


@dataclass(frozen=True)
class Text:
    text: str
    chunks: Sequence[str] | None = None
    """How the text is cut into `text_delta`s; by default one delta per word."""


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]
    chunk_size: int = 7
    """Characters of JSON per `input_json_delta`, small so assembly across deltas is exercised."""


@dataclass(frozen=True)
class Thinking:
    thinking: str
    signature: str


@dataclass(frozen=True)
class RedactedThinking:
    data: str


ContentSpec = Text | ToolUse | Thinking | RedactedThinking


@dataclass(frozen=True)
class SseReply:
    events: list[Event]


@dataclass(frozen=True)
class HttpError:
    status: int
    error_type: str
    message: str
    headers: dict[str, str] = field(default_factory=dict)


Reply = SseReply | HttpError


@dataclass(frozen=True)
class RecordedRequest:
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def credential(self) -> str | None:
        """The key as sent: SDK versions differ on `x-api-key` versus a bearer token."""
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or bearer.removeprefix("Bearer ") or None


def sse_reply(
    *content: ContentSpec,
    stop_reason: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    cache_read: int | None = None,
    cache_write: int | None = None,
    fail_after: int | None = None,
    error_type: str = "overloaded_error",
    cut_after: int | None = None,
    max_tokens_after: int | None = None,
    refusal: str | None = None,
) -> SseReply:
    """A streamed message as the API sends it: `message_start`, blocks, `message_delta`, stop.

    `fail_after=n` breaks the stream with an `error` event after its n-th delta;
    `cut_after=n` ends it there silently, as a dropped connection would;
    `max_tokens_after=n` is the model running out of tokens after its n-th delta: the open block
    is closed where it stands (a tool call with half its JSON) and the stop is `max_tokens`.
    `stop_reason="refusal"` ends it as the streaming classifiers do, `stop_details` on the
    `message_delta` (`refusal`: its explanation); `stop_reason="pause_turn"` as a paused turn.
    """
    stop = stop_reason or (
        "tool_use" if any(isinstance(c, ToolUse) for c in content) else "end_turn"
    )
    if max_tokens_after is not None:
        stop = "max_tokens"
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    events: list[Event] = [("message_start", _message_start(usage)), ("ping", {"type": "ping"})]
    deltas = 0
    for index, spec in enumerate(content):
        start, pieces = _block_events(spec)
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in pieces:
            if deltas == fail_after:
                return SseReply([*events, _error_event(error_type)])
            if deltas == cut_after:
                return SseReply(events)
            if deltas == max_tokens_after:
                break
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
            deltas += 1
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        if deltas == max_tokens_after:
            break
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": stop,
                    "stop_sequence": "STOP" if stop == "stop_sequence" else None,
                    **_stop_details(stop, refusal),
                },
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    events.append(("message_stop", {"type": "message_stop"}))
    return SseReply(events)


def _stop_details(stop: str, explanation: str | None) -> dict[str, Any]:
    """A refusal's `stop_details` arrive on the `message_delta`, beside the stop reason; its
    category and explanation may be null
    (https://platform.claude.com/docs/en/test-and-evaluate/strengthen-guardrails/handle-streaming-refusals)."""
    if stop != "refusal":
        return {}
    category = "cyber" if explanation else None
    return {"stop_details": {"type": "refusal", "category": category, "explanation": explanation}}


def http_error(
    status: int, error_type: str, message: str = "", *, retry_after_ms: int | None = 10
) -> HttpError:
    """An error answer before any streaming; `retry-after-ms` keeps the SDK's backoff short."""
    headers = {"request-id": "req_standin"}
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    return HttpError(status, error_type, message or error_type, headers)


class AnthropicStandin:
    """A real HTTP server on a free localhost port (uvicorn in a thread of its own)."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.counts: list[RecordedRequest] = []
        """Requests to the token counting endpoint, kept apart from the messages ones."""
        self.count_error: HttpError | None = None
        """Set: what the counting endpoint answers (a gateway without it, an outage)."""
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.cache = PromptCache()
        app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
            ]
        )
        self._server = BackgroundServer(app)

    @property
    def base_url(self) -> str:
        return self._server.url

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    def reset(self) -> None:
        """Forget requests, unused replies and the cache (its clock back to 0), so one server
        can serve a module of tests."""
        with self._lock:
            self._replies.clear()
            self.requests.clear()
            self.counts.clear()
            self.count_error = None
            self.cache.clear()

    def advance(self, seconds: float) -> None:
        """Move the stand-in's clock, on which cache entries expire."""
        with self._lock:
            self.cache.advance(seconds)

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._replies)

    def start(self) -> None:
        self._server.start_in_thread()

    def stop(self) -> None:
        self._server.stop_thread()

    def __enter__(self) -> AnthropicStandin:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def _messages(self, request: Request) -> Response:
        body = await request.json()
        with self._lock:
            self.requests.append(RecordedRequest(body=body, headers=dict(request.headers)))
        # beta fields and context management: tests.support.anthropic_context
        refusal = context_problem(body, request.headers) or window_refusal(body)
        if refusal is not None:
            return refusal.response()
        problem = (
            request_problem(body, ACCEPTED_FIELDS | BETA_FIELDS)
            or cache_control_problem(body)
            or binding_problem(body)
        )
        if problem is not None:
            return _error_response(
                HttpError(400, "invalid_request_error", problem, {"x-should-retry": "false"})
            )
        with self._lock:
            reply = self._replies.popleft() if self._replies else None
            cached = self.cache.account(body) if isinstance(reply, SseReply) else {}
        match reply:
            case None:
                return _error_response(
                    HttpError(
                        400,
                        "invalid_request_error",
                        "the stand-in has no scripted reply left",
                        {"x-should-retry": "false"},
                    )
                )
            case HttpError():
                return _error_response(reply)
            case SseReply():
                return StreamingResponse(
                    _stream(
                        displayed(apply_context(body, reply.events), body),
                        body.get("model", ""),
                        cached,
                    ),
                    media_type="text/event-stream",
                    headers={"request-id": "req_standin"},
                )

    async def _count_tokens(self, request: Request) -> Response:
        """`/v1/messages/count_tokens`: the same count the window and triggers use."""
        body = await request.json()
        with self._lock:
            self.counts.append(RecordedRequest(body=body, headers=dict(request.headers)))
        if self.count_error is not None:
            return _error_response(self.count_error)
        refusal = count_tokens_problem(body, request.headers)
        if refusal is not None:
            return refusal.response()
        return JSONResponse(token_count(body), headers={"request-id": "req_standin"})


def request_problem(body: dict[str, Any], accepted: frozenset[str] = ACCEPTED_FIELDS) -> str | None:
    """What the real API would answer 400 for, as far as these tests can break it; else None.
    `accepted`: wider once the beta fields were checked against the request's beta header."""
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    for key in body:
        if key not in accepted:
            return f"{key}: Extra inputs are not permitted"
    if body.get("stream") is not True:
        return "the stand-in only speaks streaming"
    messages: list[dict[str, Any]] = body["messages"]
    if not messages or messages[0]["role"] != "user":
        return "messages: first message must use the user role"
    problem = family_problem(body) or _thinking_problem(body) or display_problem(body)
    if problem is not None:
        return problem
    breakpoints = sum(1 for b in _all_blocks(body) if "cache_control" in b)
    if breakpoints > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
    previous: dict[str, Any] | None = None
    for i, message in enumerate(messages):
        if previous is not None and previous["role"] == message["role"]:
            return f"messages.{i}: roles must alternate (stand-in rule)"
        problem = _message_problem(i, message, previous)
        if problem is not None:
            return problem
        previous = message
    return None


def _thinking_problem(body: dict[str, Any]) -> str | None:
    """The bounds the SDK documents on a manual budget: at least 1,024, below `max_tokens`."""
    thinking = body.get("thinking") or {}
    if thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= body["max_tokens"]:
        return (
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our "
            "documentation at https://docs.claude.com/en/docs/build-with-claude/"
            "extended-thinking#max-tokens-and-context-window-size"
        )
    return None


def _message_problem(
    i: int, message: dict[str, Any], previous: dict[str, Any] | None
) -> str | None:
    blocks = _blocks(message)
    if not blocks:
        return f"messages.{i}: all messages must have non-empty content"
    for block in blocks:
        if block["type"] == "text" and not block["text"]:
            return f"messages.{i}: text content blocks must be non-empty"
        if block["type"] == "thinking" and not block.get("signature"):
            return f"messages.{i}: thinking blocks need their signature"
        if block["type"] in ("thinking", "redacted_thinking") and "cache_control" in block:
            return f"messages.{i}: thinking blocks cannot be cached directly"
    asked = {b["id"] for b in _blocks(previous or {}) if b["type"] == "tool_use"}
    results = [b for b in blocks if b["type"] == "tool_result"]
    answered = {b["tool_use_id"] for b in results}
    if results and blocks[: len(results)] != results:
        return f"messages.{i}: tool_result blocks must come first in the user message"
    if answered - asked:
        return f"messages.{i}: unexpected tool_use_id in tool_result: {sorted(answered - asked)}"
    if asked - answered:
        return f"messages.{i}: tool_use ids without tool_result blocks: {sorted(asked - answered)}"
    return None


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content", [])
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content)


def _all_blocks(body: dict[str, Any]) -> Iterable[dict[str, Any]]:
    system = body.get("system", [])
    yield from ([] if isinstance(system, str) else system)
    yield from body.get("tools", [])
    for message in body["messages"]:
        yield from _blocks(message)


async def _stream(events: list[Event], model: str, cached: dict[str, Any]) -> AsyncIterator[bytes]:
    """`cached`: the usage the cache rules gave, where the scripted reply did not say."""
    for name, data in signed_events(events, model):
        if name == "message_start":
            usage = {**cached, **data["message"]["usage"]}
            data = {**data, "message": {**data["message"], "model": model, "usage": usage}}
        yield f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()
        await asyncio.sleep(0)


def _error_response(error: HttpError) -> Response:
    body = {
        "type": "error",
        "error": {"type": error.error_type, "message": error.message},
        "request_id": "req_standin",
    }
    return JSONResponse(body, status_code=error.status, headers=error.headers)


def _error_event(error_type: str) -> Event:
    return ("error", {"type": "error", "error": {"type": error_type, "message": error_type}})


def _message_start(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": "msg_standin",
            "type": "message",
            "role": "assistant",
            "model": "",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        },
    }


def _block_events(spec: ContentSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    match spec:
        case Text():
            chunks = spec.chunks if spec.chunks is not None else _words(spec.text)
            return {"type": "text", "text": ""}, [{"type": "text_delta", "text": c} for c in chunks]
        case ToolUse():
            raw = json.dumps(spec.input)
            parts = [raw[i : i + spec.chunk_size] for i in range(0, len(raw), spec.chunk_size)]
            return {"type": "tool_use", "id": spec.id, "name": spec.name, "input": {}}, [
                {"type": "input_json_delta", "partial_json": p} for p in parts
            ]
        case Thinking():
            return {"type": "thinking", "thinking": "", "signature": ""}, [
                *({"type": "thinking_delta", "thinking": w} for w in _words(spec.thinking)),
                {"type": "signature_delta", "signature": spec.signature},
            ]
        case RedactedThinking():
            return {"type": "redacted_thinking", "data": spec.data}, []


def _words(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]] if text else []
