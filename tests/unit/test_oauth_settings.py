"""Which way the bot authenticates with Slack is decided at start, and said when it cannot be."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.core.settings import ConfigError, Settings
from bot.slack.scopes import install_scopes

SECRET = "client-secret-0123456789abcdef"


def settings(**values: Any) -> Settings:
    base: dict[str, Any] = {
        "SLACK_SIGNING_SECRET": SecretStr("signing"),
        "ANTHROPIC_API_KEY": SecretStr("sk-test"),
        "_env_file": None,
    }
    return Settings(**{**base, **values})


def test_the_client_id_and_secret_without_a_bot_token_install_in_many_workspaces() -> None:
    chosen = settings(
        SLACK_CLIENT_ID="1.2",
        SLACK_CLIENT_SECRET=SecretStr(SECRET),
        TOKEN_ENCRYPTION_KEYS=SecretStr(Fernet.generate_key().decode()),
    )
    assert chosen.oauth
    for command in ("serve", "worker", "clock"):
        chosen.require(command)  # no SLACK_BOT_TOKEN needed
    assert chosen.install_scopes() == install_scopes()
    assert SECRET in chosen.secrets()  # scrubbed from every log line


def test_a_bot_token_alone_is_one_workspace_as_before() -> None:
    chosen = settings(SLACK_BOT_TOKEN=SecretStr("xoxb-1"))
    assert not chosen.oauth
    chosen.require("serve")


def test_both_ways_at_once_refuse_to_start_and_say_why() -> None:
    both = settings(
        SLACK_BOT_TOKEN=SecretStr("xoxb-1"),
        SLACK_CLIENT_ID="1.2",
        SLACK_CLIENT_SECRET=SecretStr(SECRET),
    )
    assert not both.oauth
    with pytest.raises(ConfigError) as err:
        both.require("serve")
    assert "SLACK_BOT_TOKEN and SLACK_CLIENT_ID and SLACK_CLIENT_SECRET are both set" in str(
        err.value
    )
    assert SECRET not in str(err.value)


def test_half_of_the_client_credentials_is_named() -> None:
    with pytest.raises(ConfigError) as err:
        settings(SLACK_CLIENT_ID="1.2").require("serve")
    assert "SLACK_CLIENT_ID is set without SLACK_CLIENT_SECRET" in str(err.value)


def test_socket_mode_serves_one_workspace_only() -> None:
    chosen = settings(
        SLACK_CLIENT_ID="1.2", SLACK_CLIENT_SECRET=SecretStr(SECRET), SLACK_APP_TOKEN="xapp-1"
    )
    with pytest.raises(ConfigError) as err:
        chosen.require("socket")
    assert "`bot socket` serves one workspace" in str(err.value)


def test_scopes_can_be_narrowed_or_widened() -> None:
    chosen = settings(SLACK_SCOPES=" chat:write, commands ,,")
    assert chosen.install_scopes() == ["chat:write", "commands"]
