"""What the operator commands print that a person reads at a glance: ages, one-line cells, and
the Slack links they build without calling Slack (the permalink format `chat.getPermalink`
returns, or the channel's deep link)."""

from __future__ import annotations

import argparse

import pytest

from bot.cli.operator.arguments import age_seconds, slack_domain
from bot.cli.operator.links import ThreadPlace
from bot.cli.operator.output import duration, one_line

THREAD = ThreadPlace(team="T1", channel="C1", thread_ts="1700000000.000100")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "?"), (-3, "0s"), (59.9, "59s"), (60, "1m"), (3599, "59m"), (3660, "1h01m"),
     (86400 + 7200, "1d02h")],
)  # fmt: skip
def test_durations_read_at_a_glance(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown


def test_a_cell_is_one_line_cut_to_its_width() -> None:
    assert one_line("Ship  the\nrelease?", 40) == "Ship the release?"
    assert one_line("abcdefgh", 5) == "abcd…"


def test_ages_take_the_since_syntax() -> None:
    assert [age_seconds(v) for v in ("30s", "90m", "2h", "7d")] == [30, 5400, 7200, 604800]
    with pytest.raises(argparse.ArgumentTypeError):
        age_seconds("soon")


def test_links_are_permalinks_with_the_domain_and_the_channel_without() -> None:
    assert THREAD.link(None) == "https://slack.com/app_redirect?team=T1&channel=C1"
    assert THREAD.link("acme") == "https://acme.slack.com/archives/C1/p1700000000000100"
    assert THREAD.link("acme", "1700000000.000300") == (
        "https://acme.slack.com/archives/C1/p1700000000000300?thread_ts=1700000000.000100&cid=C1"
    )
    top = ThreadPlace(team="T1", channel="C1", thread_ts=None)  # a proactive post
    assert top.link("acme") == "https://slack.com/app_redirect?team=T1&channel=C1"


@pytest.mark.parametrize("given", ["acme", "ACME", "acme.slack.com", "https://acme.slack.com/"])
def test_the_domain_may_be_pasted_whole(given: str) -> None:
    assert slack_domain(given) == "acme"


def test_a_domain_that_is_not_one_is_refused() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        slack_domain("acme.example.org/x")
