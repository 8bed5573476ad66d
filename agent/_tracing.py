"""OpenTelemetry spans of a turn's runs, model calls and tool calls (GenAI conventions).

A turn may run several times: it parks and resumes days later, its worker dies and another
picks it up, a web process queues it and a worker runs it. Passing a trace context along all of
those paths (the store, Redis, a person's click) would mean storing it everywhere; instead the
trace id is derived from what every run already knows, the session key and the turn id, and each
run's `invoke_agent` span hangs under a remote parent with that trace id and a derived span id.
So every run of a turn, in any process, lands in one trace, and a run links to the run before it
when this process saw it.

Only the `opentelemetry.trace` API is imported: without the SDK set up, the global provider is a
no-op and a span costs next to nothing. Content (messages, tool arguments and results) goes into
a span only with `capture_content`, and then scrubbed by the runtime's redactor first.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TracerProvider,
)

INSTRUMENTATION = "slack_durable_agent"
SESSION_KEY = "slack_agent.session.key"
TURN_ID = "slack_agent.turn.id"
OUTCOME = "slack_agent.outcome"
REMEMBERED_RUNS = 4096
"""Runs whose span this process remembers, so the next run of the same turn links to it."""


def turn_trace_ids(session_key: str, turn_id: str) -> tuple[int, int]:
    """The turn's trace id and its root's span id: the same in every process, for every run."""
    digest = hashlib.sha256(f"{session_key}\x00{turn_id}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace_id, span_id


def turn_parent(session_key: str, turn_id: str) -> SpanContext:
    trace_id, span_id = turn_trace_ids(session_key, turn_id)
    return SpanContext(
        trace_id=trace_id, span_id=span_id, is_remote=True, trace_flags=TraceFlags(0x01)
    )


class Tracing:
    """Makes the spans; one per runtime."""

    def __init__(
        self,
        provider: TracerProvider | None,
        *,
        capture_content: bool,
        redact: Callable[[str], str],
    ) -> None:
        chosen = provider if provider is not None else trace.get_tracer_provider()
        self.tracer = chosen.get_tracer(INSTRUMENTATION)
        self.capture_content = capture_content
        self.redact = redact
        self._last_runs: OrderedDict[tuple[str, str], SpanContext] = OrderedDict()

    def content(self, value: Any) -> str:
        """JSON of `value`, scrubbed of secrets: what a span may hold when content is asked for."""
        return self.redact(json.dumps(value, default=str, ensure_ascii=False))

    def start_run(self, agent: str, session_key: str, turn_id: str) -> Span:
        parent = trace.set_span_in_context(NonRecordingSpan(turn_parent(session_key, turn_id)))
        key = (session_key, turn_id)
        previous = self._last_runs.get(key)
        span = self.tracer.start_span(
            f"invoke_agent {agent}",
            context=parent,
            kind=SpanKind.INTERNAL,
            links=[Link(previous)] if previous is not None else None,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                SESSION_KEY: session_key,
                TURN_ID: turn_id,
            },
        )
        if span.is_recording():
            self._last_runs[key] = span.get_span_context()
            self._last_runs.move_to_end(key)
            while len(self._last_runs) > REMEMBERED_RUNS:
                self._last_runs.popitem(last=False)
        return span

    def start_child(self, run: Span, name: str, attributes: dict[str, Any]) -> Span:
        return self.tracer.start_span(
            name,
            context=trace.set_span_in_context(run),
            kind=SpanKind.CLIENT if name.startswith("chat") else SpanKind.INTERNAL,
            attributes=attributes,
        )


def end_span(span: Span, *, outcome: str | None = None, error: str | None = None) -> None:
    """End `span` with its outcome; an error sets `error.type` and the ERROR status (never the
    error's text, which may quote what a user or a tool said)."""
    if outcome is not None:
        span.set_attribute(OUTCOME, outcome)
    if error is not None:
        span.set_attribute("error.type", error)
        span.set_status(Status(StatusCode.ERROR))
    span.end()


def trace_id_of(span: Span) -> str | None:
    """The span's trace id in hex, when it is being recorded (tracing is on)."""
    return format(span.get_span_context().trace_id, "032x") if span.is_recording() else None


def finish_reasons(reasons: Iterable[str | None]) -> list[str]:
    return [r for r in reasons if r]
