"""The meter's records become series with bounded labels; prices are exact or absent; the
Slack error counter counts without touching the call; the multiprocess directory is private
and fresh."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

from agent.seams import LeaseTakeover, ModelRun, StepCommitted, TokenCounts, ToolRun, TurnRun
from bot.core.metrics import MAX_LABEL_VALUES, OTHER, BotMetrics, PrometheusMeter
from bot.core.metrics_multiprocess import multiprocess_metrics
from bot.core.metrics_prices import PRICES, estimated_cost, price_of
from bot.core.ops_server import MULTIPROC_DIR
from bot.slack.error_counts import SlackErrorCounter

SESSION = "T0SECRET:C0SECRET:1700000000.000100"


def _turn(outcome: str = "completed", agent: str = "ops") -> TurnRun:
    return TurnRun(
        agent=agent,
        session_key=SESSION,
        turn_id="turn-secret-1",
        outcome=outcome,  # type: ignore[arg-type]
        seconds=1.5,
        steps=3,
        tokens=TokenCounts(input=10, output=5),
    )


def _model(model: str = "claude-sonnet-4-5-20250929", **tokens: int) -> ModelRun:
    return ModelRun(
        agent="ops", model=model, seconds=0.4, tokens=TokenCounts(**tokens), stop_reason="end_turn"
    )


def test_records_become_series() -> None:
    metrics = BotMetrics()
    meter = PrometheusMeter(metrics)
    meter.turn_ran(_turn())
    meter.turn_ran(_turn())
    meter.turn_ran(_turn("failed"))
    meter.model_called(
        _model(input=1_000_000, output=100_000, cache_read=2_000_000, cache_write=400_000)
    )
    meter.tool_called(ToolRun(agent="ops", tool="issue_refund", outcome="ok", seconds=0.2))
    meter.tool_called(ToolRun(agent="ops", tool="issue_refund", outcome="denied", seconds=0.0))
    meter.step_committed(StepCommitted(agent="ops", kind="model", seconds=0.05))
    meter.lease_taken_over(LeaseTakeover(session_key=SESSION))
    get = metrics.registry.get_sample_value
    assert get("bot_turns_total", {"agent": "ops", "outcome": "completed"}) == 2
    assert get("bot_turns_total", {"agent": "ops", "outcome": "failed"}) == 1
    assert get("bot_turn_duration_seconds_count", {"agent": "ops", "outcome": "completed"}) == 2
    assert get("bot_turn_duration_seconds_sum", {"agent": "ops", "outcome": "completed"}) == 3.0
    model = "claude-sonnet-4-5-20250929"
    assert get("bot_model_tokens_total", {"model": model, "kind": "input"}) == 1_000_000
    assert get("bot_model_tokens_total", {"model": model, "kind": "output"}) == 100_000
    assert get("bot_model_tokens_total", {"model": model, "kind": "cache_read"}) == 2_000_000
    assert get("bot_model_tokens_total", {"model": model, "kind": "cache_write"}) == 400_000
    # $3 input + $1.50 output + $0.60 cache reads + $1.50 cache writes (5-minute, 1.25x).
    assert get("bot_model_cost_usd_total", {"model": model}) == pytest.approx(6.6)
    assert get("bot_model_calls_total", {"model": model, "outcome": "ok"}) == 1
    ok = {"agent": "ops", "tool": "issue_refund", "outcome": "ok"}
    assert get("bot_tool_calls_total", ok) == 1
    assert get("bot_tool_calls_total", {**ok, "outcome": "denied"}) == 1
    assert get("bot_step_duration_seconds_count", {"agent": "ops", "kind": "model"}) == 1
    assert get("bot_lease_takeovers_total") == 1
    text = generate_latest(metrics.registry).decode()
    assert "SECRET" not in text
    assert "turn-secret" not in text


def test_a_failed_model_call_is_counted_as_an_error() -> None:
    metrics = BotMetrics()
    PrometheusMeter(metrics).model_called(
        ModelRun(
            agent="ops",
            model="claude-haiku-4-5",
            seconds=0.1,
            tokens=TokenCounts(),
            stop_reason=None,
            error="ModelUnavailableError",
        )
    )
    get = metrics.registry.get_sample_value
    assert get("bot_model_calls_total", {"model": "claude-haiku-4-5", "outcome": "error"}) == 1
    assert get("bot_model_cost_usd_total", {"model": "claude-haiku-4-5"}) is None


def test_two_bots_in_one_process_keep_their_own_counts() -> None:
    first, second = BotMetrics(), BotMetrics()
    PrometheusMeter(first).turn_ran(_turn())
    labels = {"agent": "ops", "outcome": "completed"}
    assert first.registry.get_sample_value("bot_turns_total", labels) == 1
    assert second.registry.get_sample_value("bot_turns_total", labels) is None


def test_labels_are_bounded() -> None:
    metrics = BotMetrics()
    meter = PrometheusMeter(metrics)
    for n in range(MAX_LABEL_VALUES + 20):
        meter.tool_called(ToolRun(agent="ops", tool=f"tool_{n}", outcome="ok", seconds=0.0))
        meter.model_called(_model(f"gateway-model-{n}", input=1))
    meter.tool_called(ToolRun(agent="ops", tool="x" * 500, outcome="ok", seconds=0.0))
    families = {f.name: f for f in metrics.registry.collect()}
    tools = {s.labels["tool"] for s in families["bot_tool_calls"].samples}
    models = {s.labels["model"] for s in families["bot_model_tokens"].samples}
    assert len(tools) == MAX_LABEL_VALUES + 1
    assert OTHER in tools
    assert len(models) == MAX_LABEL_VALUES + 1
    assert OTHER in models
    assert max(len(t) for t in tools) <= 80
    assert (
        metrics.registry.get_sample_value(
            "bot_tool_calls_total", {"agent": "ops", "tool": OTHER, "outcome": "ok"}
        )
        == 21  # the 20 past the cap and the long name
    )
    # Values seen before the cap was reached keep their own series.
    meter.tool_called(ToolRun(agent="ops", tool="tool_0", outcome="ok", seconds=0.0))
    assert (
        metrics.registry.get_sample_value(
            "bot_tool_calls_total", {"agent": "ops", "tool": "tool_0", "outcome": "ok"}
        )
        == 2
    )


@pytest.mark.parametrize(
    ("model", "priced"),
    [
        ("claude-sonnet-4-5", True),
        ("claude-sonnet-4-5-20250929", True),
        ("claude-3-7-sonnet-latest", True),
        ("claude-opus-4-1-20250805", True),
        ("claude-opus-4-6", True),
        ("claude-sonnet-5-5", True),
        ("claude-fable-5-2", False),  # not in the table: never read as claude-fable-5
        ("claude-sonnet-4-5-extra", False),
        ("my-gateway-alias", False),
    ],
)
def test_prices_are_exact_or_absent(model: str, priced: bool) -> None:
    assert (price_of(model) is not None) == priced
    cost = estimated_cost(model, TokenCounts(input=1_000_000))
    assert (cost > 0) == priced


def test_price_table_rates() -> None:
    opus = PRICES["claude-opus-4-5"]
    assert (opus.input, opus.output, opus.cache_read, opus.cache_write) == (5.0, 25.0, 0.5, 6.25)
    assert estimated_cost("claude-haiku-4-5", TokenCounts(output=2_000_000)) == 10.0
    # The default model's cache reads cost a twentieth of its input, not the usual tenth.
    sonnet = estimated_cost("claude-sonnet-5-5", TokenCounts(input=1_000_000, cache_read=1_000_000))
    assert sonnet == pytest.approx(2.10)


class _Sink:
    def __init__(self, fail: bool = False) -> None:
        self.errors: list[tuple[str, str]] = []
        self.limited: list[str] = []
        self.fail = fail

    def slack_failed(self, method: str, error: str) -> None:
        if self.fail:
            raise RuntimeError("broken sink")
        self.errors.append((method, error))

    def slack_rate_limited_once(self, method: str) -> None:
        self.limited.append(method)


def _request(method: str) -> HttpRequest:
    return HttpRequest(method="POST", url=f"https://slack.com/api/{method}", headers={})


async def _ask(counter: SlackErrorCounter, method: str, **kw: object) -> bool:
    return await counter.can_retry_async(state=RetryState(), request=_request(method), **kw)  # type: ignore[arg-type]


async def test_slack_errors_are_counted_and_never_retried() -> None:
    sink = _Sink()
    counter = SlackErrorCounter(sink)
    ok = HttpResponse(status_code=200, headers={}, body={"ok": True})
    refused = HttpResponse(
        status_code=200, headers={}, body={"ok": False, "error": "not_in_channel"}
    )
    limited = HttpResponse(status_code=429, headers={"Retry-After": "1"}, body={"ok": False})
    broken = HttpResponse(status_code=503, headers={})
    assert not await _ask(counter, "chat.postMessage", response=ok)
    assert not await _ask(counter, "chat.postMessage", response=refused)
    assert not await _ask(counter, "chat.update", response=limited)
    assert not await _ask(counter, "views.publish", response=broken)
    assert not await _ask(counter, "auth.test", error=TimeoutError())
    assert sink.errors == [
        ("chat.postMessage", "not_in_channel"),
        ("chat.update", "ratelimited"),
        ("views.publish", "http_503"),
        ("auth.test", "TimeoutError"),
    ]
    assert sink.limited == ["chat.update"]


async def test_a_broken_sink_never_fails_the_call() -> None:
    counter = SlackErrorCounter(_Sink(fail=True))
    refused = HttpResponse(status_code=200, headers={}, body={"ok": False, "error": "x"})
    assert not await _ask(counter, "chat.postMessage", response=refused)


def test_slack_errors_reach_the_metrics() -> None:
    metrics = BotMetrics()
    metrics.slack_failed("chat.update", "ratelimited")
    metrics.slack_rate_limited_once("chat.update")
    get = metrics.registry.get_sample_value
    assert get("bot_slack_api_errors_total", {"method": "chat.update", "error": "ratelimited"}) == 1
    assert get("bot_slack_api_rate_limited_total", {"method": "chat.update"}) == 1


def test_one_web_process_keeps_its_metrics_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_DIR, raising=False)
    with multiprocess_metrics(1) as directory:
        assert directory is None
        assert MULTIPROC_DIR not in os.environ


def test_several_web_processes_get_a_fresh_private_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(MULTIPROC_DIR, raising=False)
    with multiprocess_metrics(2) as directory:
        assert directory is not None
        assert os.environ[MULTIPROC_DIR] == str(directory)
        assert directory.stat().st_mode & 0o077 == 0
        (directory / "counter_123.db").write_bytes(b"x")
    assert not directory.exists()
    assert MULTIPROC_DIR not in os.environ


def test_an_operators_directory_is_emptied_first(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MULTIPROC_DIR, str(tmp_path))
    (tmp_path / "counter_99.db").write_bytes(b"old run")
    (tmp_path / "notes.txt").write_text("kept")
    with multiprocess_metrics(3) as directory:
        assert directory == tmp_path
        assert not (tmp_path / "counter_99.db").exists()
    assert (tmp_path / "notes.txt").exists()
    assert os.environ[MULTIPROC_DIR] == str(tmp_path)


def test_the_counter_survives_bolts_deep_copy_of_the_client() -> None:
    """Bolt deep-copies each request (its client included) for lazy listeners: the copy must
    count into the same metrics, and copying must not fail on the metrics' locks."""
    import copy

    from bot.slack.calls import make_client

    metrics = BotMetrics()
    client = make_client(
        "xoxb-test", "http://127.0.0.1:1/api/", observer=SlackErrorCounter(metrics)
    )
    copied = copy.deepcopy(client)
    assert copied.retry_handlers[0] is client.retry_handlers[0]


def test_an_operators_directory_is_emptied_with_one_process_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(MULTIPROC_DIR, str(tmp_path))
    (tmp_path / "histogram_7.db").write_bytes(b"old run")
    with multiprocess_metrics(1) as directory:
        assert directory == tmp_path
        assert not (tmp_path / "histogram_7.db").exists()
