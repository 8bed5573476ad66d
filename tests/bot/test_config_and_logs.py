"""Configuration errors name everything missing; logs never carry a secret."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from collections.abc import Iterator

import pytest

from bot.cli.main import main
from bot.core.logs import setup_logging
from bot.core.settings import ConfigError, Settings
from tests.bot.agents import AGENT, SIMPLE, model
from tests.bot.harness import SECRET, TOKEN, eventually, idle, replies

ENV = ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY")


@contextlib.contextmanager
def root_logging_kept() -> Iterator[None]:
    """The root logger's handlers and level as they were, whatever the test (or `main`) set up."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        yield
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])


def test_missing_settings_are_listed_in_one_message(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(tmp_path)  # no .env here
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigError) as err:
        Settings().require("serve")
    assert "SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, ANTHROPIC_API_KEY" in str(err.value)

    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    with root_logging_kept():
        assert main(["socket"]) == 2
    message = capsys.readouterr().err
    assert "SLACK_APP_TOKEN, ANTHROPIC_API_KEY" in message
    assert "SLACK_BOT_TOKEN" not in message


async def test_logs_are_json_and_never_contain_the_token_or_the_secret(db_url, launch, standin):
    buffer = io.StringIO()
    with root_logging_kept():
        setup_logging(level="DEBUG", secrets=[TOKEN, SECRET], stream=buffer)
        app = await launch(db_url, AGENT, model(SIMPLE))
        logging.getLogger("bot.test").warning("token %s and %s", TOKEN, "xoxb-other-999-abc")
        await app.slack.mention("U0ALICE", "hello", channel="C0LOGS")
        await eventually(lambda: replies(standin, "C0LOGS") and idle(standin, "C0LOGS"))
    text = buffer.getvalue()
    assert text
    assert TOKEN not in text
    assert SECRET not in text
    assert "xoxb-other" not in text
    for line in text.splitlines():
        json.loads(line)


async def test_start_up_logs_no_false_warning_about_the_bot_token(
    db_url, launch, standin, monkeypatch
):
    """Bolt reads SLACK_BOT_TOKEN from the environment itself and warns, at every start, that
    it is unused beside the client it is given; the client carries that same token."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    buffer = io.StringIO()
    with root_logging_kept():
        setup_logging(level="DEBUG", secrets=[TOKEN, SECRET], stream=buffer)
        app = await launch(db_url, AGENT, model(SIMPLE))
        await app.slack.mention("U0ALICE", "hello", channel="C0WARN")
        await eventually(lambda: replies(standin, "C0WARN") and idle(standin, "C0WARN"))
    assert buffer.getvalue()  # the log was captured
    assert "will be unused" not in buffer.getvalue()


@pytest.mark.parametrize("command", ["serve", "worker", "clock", "socket"])
def test_a_copied_env_example_left_unfilled_refuses_to_start_naming_the_placeholders(
    command, monkeypatch, tmp_path, capsys
):
    """The alternative is a bot that starts and fails at its first call, in front of a user."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BOT_OFFLINE", raising=False)
    monkeypatch.setenv("DATABASE_URL", f"sqlite+aiosqlite:///{tmp_path}/never.db")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "REPLACE-with-the-xoxb-bot-token")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "a-real-looking-signing-secret")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-real-looking")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "replace-with-your-key")
    with root_logging_kept():
        assert main([command]) == 2
    message = capsys.readouterr().err
    assert "SLACK_BOT_TOKEN, ANTHROPIC_API_KEY still hold .env.example's placeholder" in message
    assert "SLACK_SIGNING_SECRET" not in message
    assert "REPLACE-with" not in message
    assert not (tmp_path / "never.db").exists()  # refused before anything was opened


@pytest.mark.usefixtures("serving")
async def test_a_mention_leaves_an_access_line_and_one_line_for_its_turn(db_url, launch, standin):
    """What an operator greps for: the request Slack made, and the turn it started, by id; in
    web + worker mode the worker, which ran the turn, writes its line."""
    buffer = io.StringIO()
    with root_logging_kept():
        setup_logging(level="INFO", secrets=[TOKEN, SECRET], stream=buffer)
        app = await launch(db_url, AGENT, model(SIMPLE))
        await app.slack.mention("U0ALICE", "hello", channel="C0TURNLOG")
        await eventually(lambda: replies(standin, "C0TURNLOG") and idle(standin, "C0TURNLOG"))
        await eventually(lambda: '"logger": "bot.turns"' in buffer.getvalue())
    lines = [json.loads(line) for line in buffer.getvalue().splitlines()]
    access = [line for line in lines if line["logger"] == "bot.access"]
    assert any(
        (line["method"], line["path"], line["status"]) == ("POST", "/slack/events", 200)
        for line in access
    )
    [turn] = [line for line in lines if line["logger"] == "bot.turns"]
    assert turn["outcome"] == "completed"
    assert turn["session"].startswith("slack:")
    assert ":C0TURNLOG:" in turn["session"]
    assert turn["turn_id"]
    assert turn["steps"] >= 1
    assert turn["input_tokens"] > 0
    assert isinstance(turn["duration_ms"], float)
