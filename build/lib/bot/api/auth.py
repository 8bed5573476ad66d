"""Who is calling the HTTP turn API: a bearer token from `API_TOKENS`, bound to one principal.

The principal (`{team, enterprise, user}`) is what the API attests: the speaker of the turns the
token starts and the answerer of what it resumes or confirms. Nothing in a request body can name
anyone else. The team is the tenant: every session the token reaches lives under its team
(`bot.api.keys`), so a token can never read, start, answer, cancel or reset another team's.

Tokens are secrets: compared in constant time (every token is compared, a match does not stop
the loop), scrubbed from logs (`Settings.secrets`), and never quoted in an error, including the
start-up error for a malformed `API_TOKENS`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from agent import Principal

MIN_TOKEN_CHARS = 16
"""Shorter tokens are refused at start: guessable, and too short to scrub from logs safely."""
_TEAM = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A team or enterprise id: no `:`, which would let a team name reach into another's keys."""
_USER = re.compile(r"[A-Za-z0-9_.@+-]{1,128}")
_TOKEN = re.compile(r"[\x21-\x7e]+")
"""Printable ASCII without spaces: what an `Authorization` header can carry."""
_BEARER = re.compile(r"Bearer +([\x21-\x7e]+) *", re.IGNORECASE)


class TokenError(ValueError):
    """`API_TOKENS` is malformed; the message says what is wrong and never quotes a token."""


@dataclass(frozen=True, kw_only=True)
class Caller:
    """An authenticated request's principal."""

    team: str
    user: str
    enterprise: str | None = None

    @property
    def principal(self) -> Principal:
        return {"team": self.team, "enterprise": self.enterprise, "user": self.user}


class TokenTable:
    """The tokens and their callers, kept as SHA-256 digests (so a comparison's time does not
    depend on the presented token's length, and the table holds no token itself)."""

    def __init__(self, entries: dict[str, Caller]) -> None:
        self._entries = [(_digest(token), caller) for token, caller in entries.items()]

    def __len__(self) -> int:
        return len(self._entries)

    def caller(self, authorization: str | None) -> Caller | None:
        """The caller an `Authorization: Bearer <token>` header names, or None."""
        if not authorization:
            return None
        found = _BEARER.fullmatch(authorization)
        if found is None:
            return None
        presented = _digest(found.group(1))
        match: Caller | None = None
        for digest, caller in self._entries:
            if hmac.compare_digest(presented, digest):
                match = caller
        return match


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def parse_tokens(raw: SecretStr | str | None) -> TokenTable | None:
    """The table `API_TOKENS` describes, or None when it is unset or blank (the API is off)."""
    text = raw.get_secret_value() if isinstance(raw, SecretStr) else raw
    if text is None or not text.strip():
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise TokenError(
            'not JSON; expected an object such as {"<token>": {"team": "T1", "user": "U1"}}'
        ) from None
    if not isinstance(data, dict) or not data:
        raise TokenError('expected a non-empty JSON object {"<token>": {"team": ..., "user": ...}}')
    entries: dict[str, Caller] = {}
    for number, (token, value) in enumerate(data.items(), start=1):
        where = f"token #{number}"
        if len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token):
            raise TokenError(
                f"{where} must be at least {MIN_TOKEN_CHARS} printable ASCII characters, "
                "without spaces"
            )
        entries[token] = _caller(value, where)
    return TokenTable(entries)


def _caller(value: Any, where: str) -> Caller:
    if not isinstance(value, dict):
        raise TokenError(f'{where}: expected {{"team": ..., "user": ..., "enterprise": ...}}')
    unknown = set(value) - {"team", "user", "enterprise"}
    if unknown:
        raise TokenError(f"{where}: unknown keys {sorted(unknown)}")
    team, user, enterprise = value.get("team"), value.get("user"), value.get("enterprise")
    if not isinstance(team, str) or not _TEAM.fullmatch(team):
        raise TokenError(f"{where}: team must be 1-64 letters, digits, '_' or '-'")
    if not isinstance(user, str) or not _USER.fullmatch(user):
        raise TokenError(f"{where}: user must be 1-128 letters, digits or '_.@+-'")
    if enterprise is not None and (
        not isinstance(enterprise, str) or not _TEAM.fullmatch(enterprise)
    ):
        raise TokenError(f"{where}: enterprise must be null or 1-64 letters, digits, '_' or '-'")
    return Caller(team=team, user=user, enterprise=enterprise)


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
