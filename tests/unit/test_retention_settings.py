"""Retention's ages and settings: read once, refused in one line naming what is wrong."""

from __future__ import annotations

import pytest

from bot.core.retention import AgeError, Retention, parse_age
from bot.core.settings import ConfigError, Settings


@pytest.mark.parametrize(
    ("text", "seconds"), [("90m", 5400), ("12h", 43200), ("30d", 2592000), ("2w", 1209600)]
)
def test_ages(text: str, seconds: float) -> None:
    assert parse_age(text, name="--older-than") == seconds


@pytest.mark.parametrize("text", ["", "30", "0d", "-1d", "1.5d", "30 days", "d30", "30s"])
def test_what_is_not_an_age(text: str) -> None:
    with pytest.raises(AgeError, match=r"^--older-than '.*' is not an age: "):
        parse_age(text, name="--older-than")


def test_the_clock_prunes_only_when_told_to() -> None:
    assert Retention.from_settings(Settings(_env_file=None)) is None  # type: ignore[call-arg]
    configured = Settings(  # type: ignore[call-arg]
        _env_file=None,
        PRUNE_OLDER_THAN="30d",
        PRUNE_RECEIPTS_OLDER_THAN="52w",
        PRUNE_EVERY="6h",
        PRUNE_BATCH=100,
    )
    assert Retention.from_settings(configured) == Retention(
        older_than=30 * 86400, receipts_older_than=52 * 7 * 86400, batch=100, every=6 * 3600
    )


def test_bot_clock_names_a_bad_retention_setting_when_it_starts() -> None:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        SLACK_BOT_TOKEN="xoxb-test",
        ANTHROPIC_API_KEY="test-key",
        PRUNE_OLDER_THAN="a month",
    )
    with pytest.raises(ConfigError, match="PRUNE_OLDER_THAN 'a month' is not an age"):
        settings.require("clock")
    settings.require("worker")  # only the clock prunes
