"""Spans for the tracing tests: an SDK provider that keeps what it records in memory, a local
OTLP/HTTP receiver for spans a child process exports, and the queries the tests make of both.

Each test gets its own provider, handed to the runtime (`Runtime(tracer_provider=...)`): the
global one is never set, since OpenTelemetry lets a process set it only once.

Run as a module, it is a crash child (`tests.support.crash_child`) with tracing installed from
its environment, the way `bot worker` installs it:

    python -m tests.support.spans URL SESSION TURN [crash_child's options]
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


@dataclass
class Spans:
    """A provider recording every ended span, and what the tests ask of them."""

    exporter: InMemorySpanExporter = field(default_factory=InMemorySpanExporter)
    provider: TracerProvider = field(default_factory=lambda: TracerProvider(shutdown_on_exit=False))

    def __post_init__(self) -> None:
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.all() if (s.name or "").startswith(prefix)]

    def runs(self) -> list[ReadableSpan]:
        return self.named("invoke_agent")

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        ctx = parent.get_span_context()
        assert ctx is not None
        return [s for s in self.all() if s.parent is not None and s.parent.span_id == ctx.span_id]

    def close(self) -> None:
        self.provider.shutdown()


def trace_hex(span: ReadableSpan) -> str:
    ctx = span.get_span_context()
    assert ctx is not None
    return format(ctx.trace_id, "032x")


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def everything_said(spans: Iterable[ReadableSpan]) -> str:
    """Every name, attribute and event of `spans`, as one text to search for what must not
    be there (a secret, a prompt)."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name or "")
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        for event in span.events:
            parts.append(event.name)
            parts.append(json.dumps(dict(event.attributes or {}), default=str))
        parts.append(str(span.status.description or ""))
    return "\n".join(parts)


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    attributes: dict[str, Any]


@dataclass
class OtlpReceiver:
    """An OTLP/HTTP collector's one route, `POST /v1/traces` (protobuf), keeping the spans."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    arrived: asyncio.Event | None = None

    @property
    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/traces", self._export, methods=["POST"])])

    async def _export(self, request: Request) -> Response:
        message = ExportTraceServiceRequest()
        message.ParseFromString(await request.body())
        for resource in message.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    values = {a.key: _value(a.value) for a in span.attributes}
                    self.spans.append(ReceivedSpan(span.name, span.trace_id.hex(), values))
        return Response(ExportTraceServiceRequest().SerializeToString())

    def named(self, prefix: str) -> Sequence[ReceivedSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _traced_crash_child() -> int:
    from bot.core.tracing import traced_process
    from tests.support import crash_child

    with traced_process():
        return asyncio.run(crash_child.main())


if __name__ == "__main__":
    sys.exit(_traced_crash_child())
