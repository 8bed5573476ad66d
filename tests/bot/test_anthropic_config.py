"""The bot's Anthropic settings: one default model, and every `ANTHROPIC_*` value reaching the wire.

The model the bot builds is driven against the Anthropic stand-in over HTTP, so "reaches the
model" means the request the API would receive carries it (the thinking budget in the body, the
timeout in the SDK's `x-stainless-read-timeout` header, the retries as a count of requests).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.resources.messages import messages as sdk_messages

from agent import AnthropicSettings, ModelError, ModelSettings, UserMessage
from agent.models import DEFAULT_MAX_TOKENS, DEFAULT_MODEL
from agent.seams import ModelRequest
from bot import commands
from bot.app import build_model
from bot.cli import main
from bot.settings import ConfigError, Settings
from tests.support.anthropic_standin import AnthropicStandin, Text, http_error, sse_reply

KEY = "sk-ant-api03-config-test-key"


@pytest.fixture
def api() -> Iterator[AnthropicStandin]:
    with AnthropicStandin() as standin:
        yield standin


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """A clean environment with no `.env` to read, and the credentials every command needs."""
    monkeypatch.chdir(tmp_path)
    for name in (
        "ANTHROPIC_MODEL",
        "ANTHROPIC_MAX_TOKENS",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_THINKING",
        "ANTHROPIC_THINKING_BUDGET",
        "ANTHROPIC_TIMEOUT_SECONDS",
        "ANTHROPIC_MAX_RETRIES",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-config-test")
    return monkeypatch


def request() -> ModelRequest:
    return ModelRequest(
        system="", messages=(UserMessage(turn_id="t", text="hi"),), settings=ModelSettings()
    )


async def drain(model: Any) -> None:
    async for _ in model.stream(request()):
        pass


def test_one_default_model_which_the_sdk_does_not_deprecate() -> None:
    assert DEFAULT_MODEL not in sdk_messages.DEPRECATED_MODELS
    # Manual thinking (ANTHROPIC_THINKING_BUDGET) warns on every request for these models.
    assert DEFAULT_MODEL not in sdk_messages.MODELS_TO_WARN_WITH_THINKING_ENABLED
    assert Settings.model_fields["anthropic_model"].default == DEFAULT_MODEL
    assert AnthropicSettings.model_fields["model"].default == DEFAULT_MODEL
    assert Settings.model_fields["anthropic_max_tokens"].default == DEFAULT_MAX_TOKENS


async def test_the_environment_reaches_the_request(
    env: pytest.MonkeyPatch, api: AnthropicStandin
) -> None:
    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    env.setenv("ANTHROPIC_MAX_TOKENS", "8000")
    env.setenv("ANTHROPIC_THINKING", "true")
    env.setenv("ANTHROPIC_THINKING_BUDGET", "2048")
    env.setenv("ANTHROPIC_TIMEOUT_SECONDS", "42.5")
    env.setenv("ANTHROPIC_MAX_RETRIES", "0")
    settings = Settings()
    settings.require("worker")
    api.enqueue(http_error(529, "overloaded_error"), sse_reply(Text("ok")))
    model = build_model(settings)
    try:
        with pytest.raises(ModelError, match="overloaded_error"):
            await drain(model)
        assert len(api.requests) == 1  # no retry: ANTHROPIC_MAX_RETRIES=0
        await drain(model)
    finally:
        await model.aclose()

    sent = api.requests[-1]
    assert sent.body["model"] == DEFAULT_MODEL
    assert sent.body["max_tokens"] == 8000
    assert sent.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sent.headers["x-stainless-read-timeout"] == "42.5"


async def test_thinking_is_off_by_default(env: pytest.MonkeyPatch, api: AnthropicStandin) -> None:
    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    api.enqueue(sse_reply(Text("ok")))
    model = build_model(Settings())
    try:
        await drain(model)
    finally:
        await model.aclose()

    (sent,) = api.requests
    assert "thinking" not in sent.body
    assert sent.headers["x-stainless-read-timeout"] == "600.0"


@pytest.mark.parametrize(
    ("budget", "max_tokens", "problem"),
    [
        (
            "4096",
            None,
            "ANTHROPIC_THINKING_BUDGET (4096) must be below ANTHROPIC_MAX_TOKENS (4096)",
        ),
        (
            "9000",
            "8000",
            "ANTHROPIC_THINKING_BUDGET (9000) must be below ANTHROPIC_MAX_TOKENS (8000)",
        ),
        ("512", None, "ANTHROPIC_THINKING_BUDGET (512) must be at least 1024"),
    ],
)
def test_a_bad_thinking_budget_stops_the_bot_at_start(
    env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    budget: str,
    max_tokens: str | None,
    problem: str,
) -> None:
    env.setenv("ANTHROPIC_THINKING", "true")
    env.setenv("ANTHROPIC_THINKING_BUDGET", budget)
    if max_tokens is not None:
        env.setenv("ANTHROPIC_MAX_TOKENS", max_tokens)

    async def started(settings: Settings) -> int:
        raise AssertionError("the worker started with a thinking budget the API refuses")

    env.setattr(commands, "worker", started)

    with pytest.raises(ConfigError, match=re.escape(problem)):
        Settings().require("worker")
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        assert main(["worker"]) == 2
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    message = capsys.readouterr().err
    assert problem in message
    assert KEY not in message


@pytest.mark.parametrize(("run_turns", "imported"), [("false", "False"), ("true", "True")])
async def test_a_web_process_that_runs_no_turns_does_not_load_the_sdk(
    env: pytest.MonkeyPatch, tmp_path: Path, run_turns: str, imported: str
) -> None:
    """Three seconds of CPU per web process (the SDK's types), on every start under
    `WEB_CONCURRENCY`, for a model it never calls; a worker loads it as it opens."""
    from storage import upgrade_database
    from tests.support import children

    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"
    await upgrade_database(url)
    environment = {
        "DATABASE_URL": url,
        "RUN_TURNS": run_turns,
        "SLACK_SIGNING_SECRET": "config-test-secret",
        "LOG_LEVEL": "WARNING",
    }
    ran = await children.run("tests.support.web_only_child", env=environment)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split()[-1] == imported


async def test_a_deferred_model_builds_on_the_first_turn_and_streams_it(
    env: pytest.MonkeyPatch, api: AnthropicStandin
) -> None:
    from bot.deferred_model import DeferredModel

    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    built: list[Any] = []

    def build() -> Any:
        built.append(build_model(Settings()))
        return built[-1]

    model = DeferredModel(build)
    assert not built
    api.enqueue(sse_reply(Text("hello there")), sse_reply(Text("again")))
    try:
        texts = [getattr(event, "text", None) async for event in model.stream(request())]
        assert "hello there" in "".join(t for t in texts if t)
        stream = model.stream(request())
        await anext(stream)  # read one event, then stop, as a cancelled turn does
        await stream.aclose()
        assert len(built) == 1, "built once, on the first turn"
        assert len(api.requests) == 2
    finally:
        await built[0].aclose()
