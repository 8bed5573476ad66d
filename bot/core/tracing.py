"""Traces out of the bot's processes: the OpenTelemetry SDK, set up from the standard variables.

The engine only speaks the OpenTelemetry API (`agent._tracing`), which is a no-op until a
process installs an SDK provider. Each long-running process (`bot serve`'s web processes,
`bot socket`, `bot clock`, `bot worker`) calls `install_tracing` when it starts: with the `otel`
extra installed and the variables asking for traces, spans go out over OTLP/HTTP; otherwise the
process runs exactly as without tracing.

The variables are OpenTelemetry's own, read from the process environment (not from `.env`):
- `OTEL_SDK_DISABLED=true`: no traces, whatever else is set;
- `OTEL_TRACES_EXPORTER`: `otlp` (the default once an endpoint is set), `console` (spans printed
  to stdout, for a look at a development machine), `none`;
- `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or `OTEL_EXPORTER_OTLP_ENDPOINT` (the base,
  `/v1/traces` added); headers and timeouts by the exporter's own `OTEL_EXPORTER_OTLP_*`;
- `OTEL_SERVICE_NAME` (default `slack-agent-bot`), `OTEL_RESOURCE_ATTRIBUTES`.

Content (prompts, tool arguments) goes into spans only with
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (`Settings.capture_content`, passed to
the runtime), and scrubbed of secrets even then.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Coroutine, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

log = logging.getLogger(__name__)
P = ParamSpec("P")

DEFAULT_SERVICE_NAME = "slack-agent-bot"
_TRUE = {"true", "1", "yes", "on"}


def _exporter_name(environ: Mapping[str, str]) -> str | None:
    """Which exporter the variables ask for, or None when they ask for no traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return None
    chosen = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if chosen == "none" or (not chosen and not endpoint):
        return None
    return chosen or "otlp"


def _endpoint(environ: Mapping[str, str]) -> str | None:
    full = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if full:
        return full
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    return f"{base.rstrip('/')}/v1/traces" if base else None


def configure_tracing(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """An SDK provider exporting spans as `environ` (default: the process environment) asks,
    or None: no variables, tracing disabled, an exporter this bot does not know, or the `otel`
    extra missing (one warning). Installs nothing globally (`install_tracing` does)."""
    env = os.environ if environ is None else environ
    exporter_name = _exporter_name(env)
    if exporter_name is None:
        return None
    if exporter_name not in ("otlp", "console"):
        log.warning(
            "OTEL_TRACES_EXPORTER=%s is not supported here (otlp, console, none): no traces",
            exporter_name,
        )
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )

        exporter: SpanExporter
        if exporter_name == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=_endpoint(env))
    except ImportError:
        log.warning(
            "tracing variables are set but the OpenTelemetry SDK is not installed (install the "
            "`otel` extra): running without traces"
        )
        return None
    attributes: dict[str, str] = {}
    named = env.get("OTEL_SERVICE_NAME", "").strip()
    if named:
        attributes["service.name"] = named
    elif "service.name=" not in env.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        attributes["service.name"] = DEFAULT_SERVICE_NAME
    # shut down (spans flushed) at the interpreter's exit unless the process does it first
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def install_tracing(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """`configure_tracing`, made this process's global provider (which the runtime's spans go
    to). OpenTelemetry lets a process set it once; a second call keeps the first."""
    provider = configure_tracing(environ)
    if provider is not None:
        trace.set_tracer_provider(provider)
        log.info(
            "tracing on",
            extra={"exporter": _exporter_name(os.environ if environ is None else environ)},
        )
    return provider


@contextmanager
def traced_process(environ: Mapping[str, str] | None = None) -> Iterator[TracerProvider | None]:
    """A long-running command's tracing: installed on entry, flushed and shut down on exit, so
    the spans of the last turns are sent before the process ends."""
    provider = install_tracing(environ)
    try:
        yield provider
    finally:
        if provider is not None:
            provider.shutdown()


def traced(
    command: Callable[P, Coroutine[Any, Any, int]],
) -> Callable[P, Coroutine[Any, Any, int]]:
    """A long-running command run inside `traced_process`."""

    @functools.wraps(command)
    async def run(*args: P.args, **kwargs: P.kwargs) -> int:
        with traced_process():
            return await command(*args, **kwargs)

    return run
