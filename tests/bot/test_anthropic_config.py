"""The bot's Anthropic settings: one default model, and every `ANTHROPIC_*` value reaching the wire.

The model the bot builds is driven against the Anthropic stand-in over HTTP, so "reaches the
model" means the request the API would receive carries it (the thinking budget in the body, the
timeout in the SDK's `x-stainless-read-timeout` header, the retries as a count of requests).
"""

from __future__ import annotations

import logging
import re
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anthropic.resources.messages import messages as sdk_messages
from anthropic.types import ModelParam

from agent import AnthropicSettings, ModelError, ModelSettings, UserMessage
from agent.models import DEFAULT_MODEL, family_of
from agent.seams import ModelRequest
from bot.app import build_model
from bot.cli import commands
from bot.cli.main import main
from bot.core.models import model_for
from bot.core.settings import ConfigError, Settings
from tests.support.anthropic_standin import AnthropicStandin, Text, http_error, sse_reply

KEY = "sk-ant-api03-config-test-key"
LEGACY = "claude-sonnet-4-6"
"""Thinking off unless asked, a manual budget still taken, forced tool use accepted."""
CURRENT = "claude-sonnet-5-5"
"""Thinking on by default, depth by effort, no budget, no forced tool use."""


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
        "ANTHROPIC_EFFORT",
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


def test_one_default_model_which_the_sdk_lists_and_does_not_deprecate() -> None:
    assert DEFAULT_MODEL == "claude-sonnet-5-5", "the current Sonnet on the models overview"
    assert DEFAULT_MODEL in typing.get_args(typing.get_args(ModelParam)[0])
    assert DEFAULT_MODEL not in sdk_messages.DEPRECATED_MODELS
    # Manual thinking (ANTHROPIC_THINKING_BUDGET) warns on every request for these models.
    assert DEFAULT_MODEL not in sdk_messages.MODELS_TO_WARN_WITH_THINKING_ENABLED
    assert family_of(DEFAULT_MODEL).prefixes == (DEFAULT_MODEL,), "a family of its own"
    assert Settings.model_fields["anthropic_model"].default == DEFAULT_MODEL
    assert AnthropicSettings.model_fields["model"].default == DEFAULT_MODEL
    # Unset, the output budget is the model family's (thinking counts toward it).
    assert Settings.model_fields["anthropic_max_tokens"].default is None
    assert AnthropicSettings.model_fields["max_tokens"].default is None


@pytest.mark.parametrize(
    ("depth", "thinking", "output_config"),
    [
        (
            {"ANTHROPIC_MODEL": LEGACY, "ANTHROPIC_THINKING_BUDGET": "2048"},
            {"type": "enabled", "budget_tokens": 2048},
            None,
        ),
        (
            {"ANTHROPIC_MODEL": CURRENT, "ANTHROPIC_EFFORT": "xhigh"},
            {"type": "adaptive", "display": "summarized"},  # its progress, hidden unless asked
            {"effort": "xhigh"},
        ),
    ],
    ids=["legacy", "current"],
)
async def test_the_environment_reaches_the_request(
    env: pytest.MonkeyPatch,
    api: AnthropicStandin,
    depth: dict[str, str],
    thinking: dict[str, Any],
    output_config: dict[str, Any] | None,
) -> None:
    """How deep the model thinks is a budget on the old family, an effort on the new one."""
    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    env.setenv("ANTHROPIC_MAX_TOKENS", "8000")
    env.setenv("ANTHROPIC_THINKING", "true")
    for name, value in depth.items():
        env.setenv(name, value)
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
    assert sent.body["model"] == depth["ANTHROPIC_MODEL"]
    assert sent.body["max_tokens"] == 8000
    assert sent.body["thinking"] == thinking
    assert sent.body.get("output_config") == output_config
    assert sent.headers["x-stainless-read-timeout"] == "42.5"


@pytest.mark.parametrize(
    ("model_id", "budget"), [(None, 16_000), (LEGACY, 4096), ("claude-opus-5-5", 32_000)]
)
async def test_unset_thinking_and_output_budget_are_the_models_own(
    env: pytest.MonkeyPatch, api: AnthropicStandin, model_id: str | None, budget: int
) -> None:
    """Nothing about thinking is sent (off on the old family, adaptive on the new one) but the
    ask for its progress where the model hides it by default, and the output budget is the
    family's: 4,096 where thinking is off, more where it always runs."""
    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    if model_id is not None:
        env.setenv("ANTHROPIC_MODEL", model_id)
    api.enqueue(sse_reply(Text("ok")))
    model = build_model(Settings())
    try:
        await drain(model)
    finally:
        await model.aclose()

    (sent,) = api.requests
    hidden = family_of(model_id or DEFAULT_MODEL).default_display == "omitted"
    shown = {"type": "adaptive", "display": "summarized"}
    assert sent.body.get("thinking") == (shown if hidden else None)
    assert "output_config" not in sent.body
    assert "tool_choice" not in sent.body
    assert (
        sent.body["max_tokens"] == budget == family_of(model_id or DEFAULT_MODEL).default_max_tokens
    )
    assert sent.headers["x-stainless-read-timeout"] == "600.0"


BAD_COMBINATIONS = {
    "budget at max_tokens": (
        {"ANTHROPIC_MODEL": LEGACY, "ANTHROPIC_THINKING_BUDGET": "4096"},
        "ANTHROPIC_THINKING_BUDGET (4096) must be below ANTHROPIC_MAX_TOKENS (4096)",
    ),
    "budget over max_tokens": (
        {
            "ANTHROPIC_MODEL": LEGACY,
            "ANTHROPIC_THINKING_BUDGET": "9000",
            "ANTHROPIC_MAX_TOKENS": "8000",
        },
        "ANTHROPIC_THINKING_BUDGET (9000) must be below ANTHROPIC_MAX_TOKENS (8000)",
    ),
    "budget too small": (
        {"ANTHROPIC_MODEL": LEGACY, "ANTHROPIC_THINKING_BUDGET": "512"},
        "ANTHROPIC_THINKING_BUDGET (512) must be at least 1024",
    ),
    "budget on an adaptive-only model": (
        {"ANTHROPIC_MODEL": CURRENT, "ANTHROPIC_THINKING_BUDGET": "2048"},
        f"ANTHROPIC_THINKING_BUDGET is not supported by {CURRENT}, whose thinking is adaptive: "
        "unset it and set ANTHROPIC_EFFORT (low, medium, high, xhigh, max) for how much it thinks",
    ),
    "effort on a model without it": (
        {"ANTHROPIC_MODEL": "claude-sonnet-4-5", "ANTHROPIC_EFFORT": "low"},
        "ANTHROPIC_EFFORT is not supported by claude-sonnet-4-5: unset it, or choose a model "
        "that takes effort",
    ),
    "effort level the model lacks": (
        {"ANTHROPIC_MODEL": LEGACY, "ANTHROPIC_EFFORT": "xhigh"},
        f"ANTHROPIC_EFFORT=xhigh is not accepted by {LEGACY} (it takes low, medium, high, max)",
    ),
    "max_tokens above the model's output": (
        {"ANTHROPIC_MODEL": "claude-haiku-4-5", "ANTHROPIC_MAX_TOKENS": "100000"},
        "ANTHROPIC_MAX_TOKENS (100000) is above the 64000 output tokens claude-haiku-4-5 can write",
    ),
    "thinking off at an effort that forbids it": (
        {"ANTHROPIC_MODEL": CURRENT, "ANTHROPIC_THINKING": "false", "ANTHROPIC_EFFORT": "max"},
        f"ANTHROPIC_THINKING=false on {CURRENT} needs ANTHROPIC_EFFORT at high or lower: "
        "thinking cannot be turned off at max",
    ),
}


@pytest.mark.parametrize(("settings", "problem"), BAD_COMBINATIONS.values(), ids=BAD_COMBINATIONS)
def test_a_combination_the_model_refuses_stops_the_bot_at_start(
    env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    settings: dict[str, str],
    problem: str,
) -> None:
    """One clear line naming the setting and the model, before the first turn's 400."""
    env.setenv("ANTHROPIC_THINKING", "true")
    for name, value in settings.items():
        env.setenv(name, value)

    async def started(settings: Settings) -> int:
        raise AssertionError("the worker started with settings the API refuses")

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
    assert len(message.strip().splitlines()) == 1


def test_an_unknown_effort_stops_the_bot_in_one_line(
    env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env.setenv("ANTHROPIC_EFFORT", "extreme")

    assert main(["worker"]) == 2

    message = capsys.readouterr().err
    assert message == (
        "bot worker: invalid setting: ANTHROPIC_EFFORT: Input should be 'low', 'medium', "
        "'high', 'xhigh' or 'max'\n"
    )


async def test_thinking_off_where_it_cannot_be_is_a_warning_and_never_sent(
    env: pytest.MonkeyPatch, api: AnthropicStandin, caplog: pytest.LogCaptureFixture
) -> None:
    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    env.setenv("ANTHROPIC_MODEL", "claude-opus-5-5")
    env.setenv("ANTHROPIC_THINKING", "false")
    api.enqueue(sse_reply(Text("ok")))
    settings = Settings()

    with caplog.at_level(logging.WARNING):
        settings.require("worker")
    model = build_model(settings)
    try:
        await drain(model)
    finally:
        await model.aclose()

    (sent,) = api.requests
    # never "disabled" (a 400 there); only the ask for its progress, as by default
    assert sent.body["thinking"] == {"type": "adaptive", "display": "summarized"}
    said = [r.getMessage() for r in caplog.records if "ANTHROPIC_THINKING" in r.getMessage()]
    assert said[0] == (
        "ANTHROPIC_THINKING=false has no effect on claude-opus-5-5: its thinking is always on "
        "(set ANTHROPIC_EFFORT=low for the least of it)"
    )


@pytest.mark.parametrize(
    ("model", "off"),
    [
        (LEGACY, None),
        ("claude-sonnet-5", {"type": "disabled"}),
        (CURRENT, {"type": "between_tools"}),
    ],
)
async def test_thinking_off_is_each_models_lowest_setting(
    env: pytest.MonkeyPatch, api: AnthropicStandin, model: str, off: dict[str, str] | None
) -> None:
    env.setenv("ANTHROPIC_BASE_URL", api.base_url)
    env.setenv("ANTHROPIC_MODEL", model)
    env.setenv("ANTHROPIC_THINKING", "false")
    api.enqueue(sse_reply(Text("ok")))
    settings = Settings()
    settings.require("worker")
    built = build_model(settings)
    try:
        await drain(built)
    finally:
        await built.aclose()  # type: ignore[attr-defined]

    (sent,) = api.requests
    assert sent.body.get("thinking") == off


@pytest.mark.parametrize(
    ("agent_model", "problem"),
    [
        (
            ModelSettings(model=CURRENT),
            f"the agent's model settings on {CURRENT}: ANTHROPIC_THINKING_BUDGET is not "
            f"supported by {CURRENT}",
        ),
        (
            ModelSettings(max_tokens=200_000),
            f"the agent's model settings on {LEGACY}: the agent's model max_tokens (200000) is "
            f"above the 128000 output tokens {LEGACY} can write",
        ),
    ],
)
def test_the_agents_own_model_settings_are_checked_at_start(
    env: pytest.MonkeyPatch, agent_model: ModelSettings, problem: str
) -> None:
    """`agent.py` may name another model or budget: checked with the environment's settings
    when the bot opens, not found wanting at the first turn."""
    env.setenv("ANTHROPIC_MODEL", LEGACY)
    env.setenv("ANTHROPIC_THINKING_BUDGET", "2048")
    settings = Settings()
    settings.require("worker")

    with pytest.raises(ModelError) as info:
        model_for(settings, agent_model)

    assert str(info.value).startswith(problem)
    assert "\n" not in str(info.value)


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
    from bot.core.deferred_model import DeferredModel

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
