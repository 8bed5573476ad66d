"""The bot's Prometheus metrics, on a registry of its own, and the meter that feeds them.

`BotMetrics` holds every series a bot process counts itself; `PrometheusMeter` turns the
engine's records (`agent.seams.TurnMeter`) into them. What is read from the database instead
(queue depth, parked requests, uncertain receipts) is collected at scrape time
(`bot.core.metrics_gauges`); the Slack client counts its errors (`bot.slack.error_counts`) and the
Redis relay reports its lag here through a callback.

Each bot has its own `CollectorRegistry`, never the process-wide default one: tests and a demo
run several bots in one process, and two registries holding the same name do not clash.

Labels are bounded by the deployment: the agent's name, its tools' and its models' names, Slack
API method names and error codes, and fixed outcomes. Never a session key, a user id or a
text. `Bounded` caps each label at `MAX_LABEL_VALUES` distinct values per series (later ones
count as `other`), so a gateway that reports a fresh model id per request, or a stand-in that
invents error codes, cannot grow the scrape without bound.

With `PROMETHEUS_MULTIPROC_DIR` set before `prometheus_client` is imported (`bot serve` with
`WEB_CONCURRENCY` > 1 sets it for its web processes), each process writes its values to files
there and a scrape sums them all (`bot.core.ops_server.exposition`).
"""

from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, Histogram

from agent.seams import LeaseTakeover, ModelRun, StepCommitted, ToolRun, TurnRun
from bot.core.metrics_prices import Price, estimated_cost

log = logging.getLogger(__name__)

MAX_LABEL_VALUES = 50
"""Distinct values one label of one series may take before the rest count as `other`."""
MAX_LABEL_CHARS = 80
OTHER = "other"

TURN_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 300.0, 600.0)
STEP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Bounded:
    """The values one label has taken; past `limit` distinct ones, a new value reads `other`."""

    def __init__(self, limit: int = MAX_LABEL_VALUES) -> None:
        self.limit = limit
        self._seen: set[str] = set()

    def __call__(self, value: str | None) -> str:
        text = (value or "unknown")[:MAX_LABEL_CHARS]
        if text in self._seen:
            return text
        if len(self._seen) >= self.limit:
            return OTHER
        self._seen.add(text)
        return text


class BotMetrics:
    """Every series a bot process counts, on `registry` (a new one by default)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.turns = Counter(
            "bot_turns", "Runs of turns, by how they ended.", ["agent", "outcome"], registry=r
        )
        self.turn_seconds = Histogram(
            "bot_turn_duration_seconds",
            "One run of a turn, from claiming it to its end or its park.",
            ["agent", "outcome"],
            buckets=TURN_BUCKETS,
            registry=r,
        )
        self.step_seconds = Histogram(
            "bot_step_duration_seconds",
            "One step, from its start to its commit returning.",
            ["agent", "kind"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.model_calls = Counter(
            "bot_model_calls",
            "Model calls, by model and ok/error.",
            ["model", "outcome"],
            registry=r,
        )
        self.model_seconds = Histogram(
            "bot_model_call_duration_seconds",
            "One model call, to its final message.",
            ["model"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "bot_model_tokens",
            "Tokens by model and kind (input, output, cache_read, cache_write).",
            ["model", "kind"],
            registry=r,
        )
        self.cost = Counter(
            "bot_model_cost_usd",
            "Estimated model spend in US dollars from list prices (bot.core.metrics_prices); "
            "models without a known price add nothing.",
            ["model"],
            registry=r,
        )
        self.tool_calls = Counter(
            "bot_tool_calls",
            "Tool calls, by how they settled.",
            ["agent", "tool", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "bot_tool_call_duration_seconds",
            "One tool call, until it settled.",
            ["tool"],
            buckets=STEP_BUCKETS,
            registry=r,
        )
        self.lease_takeovers = Counter(
            "bot_lease_takeovers",
            "Sessions this process claimed after another owner let its lease lapse.",
            registry=r,
        )
        self.slack_errors = Counter(
            "bot_slack_api_errors",
            "Slack Web API calls that failed, by method and error (ratelimited for a 429).",
            ["method", "error"],
            registry=r,
        )
        self.slack_rate_limited = Counter(
            "bot_slack_api_rate_limited",
            "HTTP 429 answers from the Slack Web API, by method (retried ones included).",
            ["method"],
            registry=r,
        )
        self.relay_lag = Histogram(
            "bot_redis_relay_lag_seconds",
            "From a live event's publish in one process to its receipt in another (clocks of "
            "different hosts skew it).",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self._labels: dict[str, Bounded] = {}

    def label(self, series: str, value: str | None) -> str:
        """`value` bounded for `series` (see `Bounded`)."""
        bounded = self._labels.get(series)
        if bounded is None:
            bounded = self._labels[series] = Bounded()
        return bounded(value)

    def slack_failed(self, method: str, error: str) -> None:
        """A Slack Web API call failed (`bot.slack.error_counts` calls it)."""
        self.slack_errors.labels(
            self.label("slack.method", method), self.label("slack.error", error)
        ).inc()

    def slack_rate_limited_once(self, method: str) -> None:
        self.slack_rate_limited.labels(self.label("slack.method", method)).inc()

    def relay_lagged(self, seconds: float) -> None:
        """The Redis relay's callback (`RedisEventRelay(on_lag=...)`)."""
        self.relay_lag.observe(max(seconds, 0.0))


class PrometheusMeter:
    """The engine's `TurnMeter` on `BotMetrics`. Called on the event loop; each method does a
    few in-memory increments (or, multiprocess, writes to an mmapped file) and never raises."""

    def __init__(self, metrics: BotMetrics, *, prices: dict[str, Price] | None = None) -> None:
        self.metrics = metrics
        self._prices = prices

    def turn_ran(self, record: TurnRun) -> None:
        m = self.metrics
        agent = m.label("agent", record.agent)
        m.turns.labels(agent, record.outcome).inc()
        m.turn_seconds.labels(agent, record.outcome).observe(record.seconds)

    def model_called(self, record: ModelRun) -> None:
        m = self.metrics
        model = m.label("model", record.model)
        m.model_calls.labels(model, "error" if record.error else "ok").inc()
        m.model_seconds.labels(model).observe(record.seconds)
        tokens = record.tokens
        for kind, count in (
            ("input", tokens.input),
            ("output", tokens.output),
            ("cache_read", tokens.cache_read),
            ("cache_write", tokens.cache_write),
        ):
            if count:
                m.tokens.labels(model, kind).inc(count)
        cost = estimated_cost(record.model, tokens, self._prices)
        if cost:
            m.cost.labels(model).inc(cost)

    def tool_called(self, record: ToolRun) -> None:
        m = self.metrics
        agent = m.label("agent", record.agent)
        m.tool_calls.labels(agent, m.label("tool", record.tool), record.outcome).inc()
        m.tool_seconds.labels(m.label("tool", record.tool)).observe(record.seconds)

    def step_committed(self, record: StepCommitted) -> None:
        m = self.metrics
        m.step_seconds.labels(m.label("agent", record.agent), record.kind).observe(record.seconds)

    def lease_taken_over(self, record: LeaseTakeover) -> None:
        self.metrics.lease_takeovers.inc()  # the session key is never a label
