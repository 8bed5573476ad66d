"""Scrubbing secrets out of text that leaves the process: tool errors, failure messages, logs.

An exception's message is written by whoever raised it, often a client library that helpfully
names the URL, header or token it used. Such text is stored (message log, steps, events,
receipts), sent to the model, and repeated by the model into chat, so it is scrubbed once, where
it becomes text. Two things are replaced:

- values the host configured as secret (`Redactor(secrets)`), wherever they appear, also
  URL-encoded; values shorter than `MIN_SECRET_CHARS` are ignored, because replacing a short value
  everywhere would mangle ordinary words;
- well-known credential shapes, always: Slack tokens (`xoxb-`, `xoxp-`, `xapp-`, ...), Anthropic
  keys (`sk-ant-`), `Bearer <token>`, the password in `scheme://user:password@host`, and
  `password=...` in a connection string or query.

A database error does not belong in the model's context at all (its SQL statement and parameters
describe the schema and may carry any value), so `is_database_error` lets callers replace it
with its class name and log the details instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, unquote, urlsplit

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8

_TOKEN_CHARS = r"[A-Za-z0-9_\-]"
SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    # Slack: bot, user, app, legacy, refresh, session, rotating (and `xoxe.xoxp-` rotated) tokens
    (re.compile(rf"\b(?:xox[a-z]|xapp|xwfp)(?:\.xox[a-z])?-{_TOKEN_CHARS}{{8,}}"), REDACTED),
    (re.compile(rf"\bsk-ant-{_TOKEN_CHARS}{{8,}}"), REDACTED),
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/\-]{8,}=*"), rf"\g<1>{REDACTED}"),
    # the password of `scheme://user:password@host` (the user and host help whoever debugs)
    (
        re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^@\s/]+@"),
        rf"\g<1>{REDACTED}@",
    ),
    (re.compile(r"(?i)(\bpassword=)[^\s&#;'\"]+"), rf"\g<1>{REDACTED}"),
)
"""Patterns that mark a credential whether or not anyone configured it, with their replacement."""

DATABASE_PACKAGES = frozenset(
    {"sqlalchemy", "sqlite3", "psycopg", "psycopg2", "asyncpg", "aiosqlite", "pymysql", "MySQLdb"}
)


class Redactor:
    """Replaces configured secret values and well-known credential shapes with `[redacted]`.

    Built once from configuration and passed down (no module-level registry), so two runtimes in
    one process can hold different secrets. Idempotent: scrubbing scrubbed text changes nothing.
    """

    def __init__(self, secrets: Iterable[str] = (), *, min_length: int = MIN_SECRET_CHARS) -> None:
        values: set[str] = set()
        for secret in secrets:
            value = secret.strip()
            if len(value) < min_length:
                continue
            values.add(value)
            values.add(quote(value, safe=""))
        # longest first, so a secret containing another is replaced whole
        self._values = sorted(values, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for value in self._values:
            text = text.replace(value, REDACTED)
        for pattern, replacement in SHAPES:
            text = pattern.sub(replacement, text)
        return text


def password_in_url(url: str | None) -> str | None:
    """The decoded password of a URL like `postgresql://user:password@host/db`, if it has one."""
    if not url:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def is_database_error(exc: BaseException) -> bool:
    """An error raised by a database driver or SQLAlchemy, whose text carries SQL and parameters.

    Judged by the package that defines the class (or a base class), so the engine needs none of
    those packages installed to recognise their errors.
    """
    return any(cls.__module__.partition(".")[0] in DATABASE_PACKAGES for cls in type(exc).__mro__)
