"""The shape both token settings share (`API_TOKENS`, `CONSOLE_TOKENS`): a JSON object mapping
each bearer token to what it may do.

Read here once, so both refuse the same things the same way (not JSON, empty, a token too short
or with spaces) and never quote a token in the error; what each entry holds is the caller's.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import SecretStr

MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused at start: guessable, and too short to scrub from logs safely."""
_TOKEN = re.compile(r"[\x21-\x7e]+")


def token_entries(
    raw: SecretStr | str | None, error: type[ValueError], example: str
) -> list[tuple[str, Any, str]] | None:
    """`(token, value, where)` for each entry, `where` naming it by position ("token #2") for
    errors; None when the setting is unset or blank. Raises `error` naming what is wrong;
    `example` is the object's shape as the error shows it."""
    text = raw.get_secret_value() if isinstance(raw, SecretStr) else raw
    if text is None or not text.strip():
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise error(f"not JSON; expected an object such as {example}") from None
    if not isinstance(data, dict) or not data:
        raise error(f"expected a non-empty JSON object such as {example}")
    entries = []
    for number, (token, value) in enumerate(data.items(), start=1):
        where = f"token #{number}"
        if len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token):
            raise error(
                f"{where} must be at least {MIN_TOKEN_CHARS} printable ASCII characters, "
                "without spaces"
            )
        entries.append((token, value, where))
    return entries


def token_secrets(raw: SecretStr | None) -> list[str]:
    """What logs must scrub: every token, or, where the setting does not parse, all of it."""
    if raw is None or not raw.get_secret_value().strip():
        return []
    text = raw.get_secret_value()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return [text]
    if not isinstance(data, dict):
        return [text]
    return [token for token in data if isinstance(token, str) and token]
