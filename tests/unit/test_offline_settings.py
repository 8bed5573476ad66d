"""Offline mode (`BOT_OFFLINE=true`, `bot serve --offline`) needs nothing, and is refused, in
one line naming what is wrong, wherever it could reach something real: a Slack app's or
Anthropic's credentials, a shared database or Redis (whose workers would run its turns with the
real model), several web processes, or a command other than `bot serve`."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr

from bot.core.settings import CREDENTIALS, ConfigError, Settings
from tests.unit.test_deploy_files import env_example

REAL = "xoxb-1234-5678-realLookingValue"


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*CREDENTIALS, "DATABASE_URL", "REDIS_URL", "RUN_TURNS", "WEB_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)


def offline(**values: Any) -> Settings:
    return Settings(**{"BOT_OFFLINE": True, "_env_file": None, **values})


def refusal(settings: Settings, command: str = "serve") -> str:
    with pytest.raises(ConfigError) as err:
        settings.require(command)
    message = str(err.value)
    assert "\n" not in message, "one line"
    assert message.startswith(f"`bot {command}` cannot run offline")
    return message


def test_offline_serve_needs_no_credential_at_all() -> None:
    offline().require("serve")


def test_the_placeholders_of_env_example_count_as_unset() -> None:
    """`cp .env.example .env` then `bot serve --offline` works as it is."""
    listed = env_example()
    placeholders = {name: listed[name] for name in CREDENTIALS}
    assert all(value.startswith("REPLACE") for value in placeholders.values())
    offline(**placeholders).require("serve")


@pytest.mark.parametrize("name", CREDENTIALS)
def test_a_real_credential_beside_offline_is_refused_by_name_never_by_value(name: str) -> None:
    message = refusal(offline(**{name: REAL}))
    assert f"{name} is set" in message
    assert REAL not in message


def test_every_real_credential_is_named_at_once() -> None:
    message = refusal(offline(SLACK_BOT_TOKEN=SecretStr(REAL), ANTHROPIC_API_KEY=SecretStr(REAL)))
    assert "SLACK_BOT_TOKEN, ANTHROPIC_API_KEY are set" in message


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"DATABASE_URL": "postgresql+psycopg://bot:pw@db:5432/bot"}, "DATABASE_URL is not SQLite"),
        ({"REDIS_URL": "redis://localhost:6379/0"}, "REDIS_URL is set"),
        ({"RUN_TURNS": False}, "RUN_TURNS=false"),
        ({"WEB_CONCURRENCY": 2}, "WEB_CONCURRENCY must be 1"),
        ({"API_TOKENS": SecretStr("not json")}, "API_TOKENS: not JSON"),
    ],
    ids=["postgres", "redis", "no-turns", "processes", "api-tokens"],
)
def test_production_settings_beside_offline_are_refused(values: dict[str, Any], named: str) -> None:
    message = refusal(offline(**values))
    assert named in message
    assert "pw@" not in message


@pytest.mark.parametrize("command", ["socket", "worker", "clock"])
def test_offline_is_for_bot_serve_only(command: str) -> None:
    assert "offline mode is `bot serve` only" in refusal(offline(), command)


def test_without_offline_serve_still_needs_its_credentials() -> None:
    with pytest.raises(ConfigError, match="missing settings SLACK_BOT_TOKEN"):
        Settings(_env_file=None).require("serve")  # type: ignore[call-arg]
