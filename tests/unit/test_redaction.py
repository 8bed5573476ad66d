"""Secrets never leave a tool error: configured values and well-known token shapes are scrubbed,
database errors reach the model only as their class, and the log filter shares the same shapes."""

from __future__ import annotations

import logging
import sqlite3

import psycopg
import pytest
from sqlalchemy import exc as sa_exc

from agent import REDACTED, Redactor, password_in_url
from agent._redaction import is_database_error
from agent._tools import MAX_ERROR_CHARS, describe_error

SECRET = "cfg-Secret-value-0042"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bot token xoxb-1234567890-0987654321-AbCdEfGhIjKl", f"bot token {REDACTED}"),
        ("user token xoxp-1234567890-0987654321-AbCdEf", f"user token {REDACTED}"),
        ("app token xapp-1-A0123456789-1234567890-abcdef", f"app token {REDACTED}"),
        ("legacy xoxa-2-1234567890-abcdef", f"legacy {REDACTED}"),
        ("refresh xoxr-1234567890-abcdef", f"refresh {REDACTED}"),
        ("session xoxs-1234567890-abcdef", f"session {REDACTED}"),
        ("rotating xoxe-1-My0xLTEyMzQ1Njc4OTA", f"rotating {REDACTED}"),
        ("rotated xoxe.xoxp-1-Mi0yLTEyMzQ1Njc4OTA", f"rotated {REDACTED}"),
        ("key=sk-ant-api03-AbCdEf_gh-IJ0123456789xyz!", f"key={REDACTED}!"),
        (
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
            f"Authorization: Bearer {REDACTED}",
        ),
        (
            "header 'authorization: bearer 0123abcdEFGH/+=' sent",
            f"header 'authorization: bearer {REDACTED}' sent",
        ),
        (
            "could not connect to postgresql+psycopg://bot:s3cr3t-pass@db.internal:5432/app",
            f"could not connect to postgresql+psycopg://bot:{REDACTED}@db.internal:5432/app",
        ),
        ("redis://:r3dis-Pa55@cache:6379/0 is down", f"redis://:{REDACTED}@cache:6379/0 is down"),
        (
            "conninfo host=db user=bot password=s3cr3t-pass dbname=app",
            f"conninfo host=db user=bot password={REDACTED} dbname=app",
        ),
        ("unix:///tmp/r.sock?db=0&password=s3cret", f"unix:///tmp/r.sock?db=0&password={REDACTED}"),
    ],
)
def test_every_token_shape_is_scrubbed_without_configuration(text: str, expected: str) -> None:
    assert Redactor()(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the Bearer of bad news",
        "see https://example.com:8443/path@anchor for details",
        "mailto:someone@example.com",
        "the xoxb- prefix marks a bot token",
        "Use the sk-ant prefix",
        "a plain https://example.com/path url",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert Redactor()(text) == text


def test_a_configured_secret_embedded_in_a_longer_string_is_scrubbed() -> None:
    redact = Redactor([SECRET])
    assert redact(f"token={SECRET}&retry=1") == f"token={REDACTED}&retry=1"
    assert redact(f"abc{SECRET}def {SECRET}") == f"abc{REDACTED}def {REDACTED}"


def test_a_short_configured_value_does_not_redact_common_words() -> None:
    redact = Redactor(["bot", "pass", "admin12", "", "  "])
    text = "the bot failed to pass the admin12 check"
    assert redact(text) == text


def test_a_value_of_the_minimum_length_is_scrubbed() -> None:
    assert Redactor(["hunter22"])("login hunter22 refused") == f"login {REDACTED} refused"


def test_the_longest_secret_wins_when_one_contains_another() -> None:
    redact = Redactor(["abcdefgh", "abcdefgh-ijklmnop"])
    assert redact("x abcdefgh-ijklmnop y abcdefgh") == f"x {REDACTED} y {REDACTED}"


def test_a_configured_secret_is_also_scrubbed_in_its_url_encoded_form() -> None:
    redact = Redactor(["p@ss/w0rd!!"])
    assert redact("login failed for p%40ss%2Fw0rd%21%21") == f"login failed for {REDACTED}"


def test_password_in_url() -> None:
    assert password_in_url("postgresql+psycopg://bot:p%40ss%2Fword@db/app") == "p@ss/word"
    assert password_in_url("redis://:r3dis-pass@cache:6379/0") == "r3dis-pass"
    assert password_in_url("sqlite+aiosqlite:///./data/bot.db") is None
    assert password_in_url("postgresql://postgres@127.0.0.1/test") is None
    assert password_in_url(None) is None


# describe_error: the one place a tool's exception becomes text ------------------------------


def test_describe_error_keeps_class_and_message_and_scrubs_token_shapes() -> None:
    error = RuntimeError("slack said invalid_auth for xoxb-1234567890-abcdefghij")
    assert describe_error(error) == f"RuntimeError: slack said invalid_auth for {REDACTED}"


def test_describe_error_scrubs_configured_secrets() -> None:
    described = describe_error(ValueError(f"key {SECRET} refused"), redact=Redactor([SECRET]))
    assert described == f"ValueError: key {REDACTED} refused"
    assert describe_error(Exception(f"plain {SECRET}"), redact=Redactor([SECRET])) == (
        f"plain {REDACTED}"
    )


def test_describe_error_scrubs_before_it_cuts() -> None:
    """A cut first would leave the secret's head behind, where no pattern can find it."""
    error = RuntimeError("x" * (MAX_ERROR_CHARS - 20) + SECRET)
    described = describe_error(error, redact=Redactor([SECRET]))
    assert len(described) <= MAX_ERROR_CHARS
    assert SECRET[:6] not in described


@pytest.mark.parametrize(
    "error",
    [
        sqlite3.OperationalError("no such table: orders"),
        psycopg.errors.UndefinedTable('relation "orders" does not exist'),
        sa_exc.OperationalError(
            "INSERT INTO orders (token) VALUES (?)",
            ("xoxb-1234567890-abcdefghij",),
            sqlite3.OperationalError("no such table: orders"),
        ),
        sa_exc.IntegrityError(
            "INSERT INTO orders (id) VALUES (%(id)s)",
            {"id": 1},
            psycopg.errors.UniqueViolation("duplicate key"),
        ),
    ],
)
def test_a_database_error_reaches_the_model_as_its_class_only(error: Exception) -> None:
    assert is_database_error(error)
    described = describe_error(error)
    assert described == f"{type(error).__name__}: a database error; details are in the logs"


def test_an_ordinary_error_is_not_a_database_error() -> None:
    assert not is_database_error(RuntimeError("no such table: orders"))
    assert not is_database_error(ValueError("x"))


# the log filter shares the shapes --------------------------------------------------------------


def test_the_log_filter_scrubs_the_shared_shapes() -> None:
    from bot.core.logs import Redactor as LogRedactor

    record = logging.LogRecord(
        "x",
        logging.ERROR,
        __file__,
        1,
        "connect %s failed; refresh %s",
        ("postgresql://bot:s3cr3t-pass@db/app", "xoxe-1-My0xLTEyMzQ1Njc4OTA"),
        None,
    )
    LogRedactor([SECRET]).filter(record)
    message = record.getMessage()
    assert "s3cr3t-pass" not in message
    assert "xoxe-1-My0xLTEyMzQ1Njc4OTA" not in message
    assert message == f"connect postgresql://bot:{REDACTED}@db/app failed; refresh {REDACTED}"
