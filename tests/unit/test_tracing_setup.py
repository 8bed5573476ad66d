"""`configure_tracing`: an SDK provider only when the standard OTEL_* variables ask for traces,
exporting over OTLP/HTTP where they point (a local receiver here); none when disabled, unset or
without the `otel` extra. The global provider is never touched: the function returns one."""

from __future__ import annotations

import logging
import sys

import pytest
from opentelemetry.sdk.trace import TracerProvider

from bot.core.asgi_server import BackgroundServer
from bot.core.tracing import DEFAULT_SERVICE_NAME, configure_tracing, traced_process
from tests.support.spans import OtlpReceiver


def test_no_variables_no_provider() -> None:
    assert configure_tracing({}) is None
    assert configure_tracing({"OTEL_SERVICE_NAME": "bot"}) is None, "a name asks for nothing"


@pytest.mark.parametrize(
    "environ",
    [
        {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
        {"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"},
        {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
    ],
)
def test_disabled_or_none_no_provider(environ: dict[str, str]) -> None:
    assert configure_tracing(environ) is None


def test_an_exporter_this_bot_does_not_know_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="bot.core.tracing"):
        assert configure_tracing({"OTEL_TRACES_EXPORTER": "zipkin"}) is None
    assert "zipkin" in caplog.text


def test_the_sdk_missing_is_one_warning_and_no_traces(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)
    with caplog.at_level(logging.WARNING, logger="bot.core.tracing"):
        provider = configure_tracing({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert provider is None
    [warning] = caplog.records
    assert "otel" in warning.getMessage()


def _export_one(provider: TracerProvider) -> None:
    try:
        with provider.get_tracer("test").start_as_current_span("probe"):
            pass
        assert provider.force_flush(30_000)
    finally:
        provider.shutdown()


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT", "TRACES_ENDPOINT"])
def test_an_endpoint_gets_an_otlp_exporter_sending_there(variable: str) -> None:
    receiver = OtlpReceiver()
    with BackgroundServer(receiver.app) as collector:
        environ = (
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{collector.url}/v1/traces"}
            if variable == "TRACES_ENDPOINT"
            else {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
        )
        provider = configure_tracing(environ)
        assert isinstance(provider, TracerProvider)
        assert provider.resource.attributes["service.name"] == DEFAULT_SERVICE_NAME
        _export_one(provider)
    assert [s.name for s in receiver.spans] == ["probe"]


def test_the_service_name_is_the_variables() -> None:
    provider = configure_tracing(
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "bot-worker"}
    )
    assert isinstance(provider, TracerProvider)
    try:
        assert provider.resource.attributes["service.name"] == "bot-worker"
    finally:
        provider.shutdown()


def test_a_process_without_variables_runs_untraced() -> None:
    with traced_process({}) as provider:
        assert provider is None
