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
import re
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from agent import Principal
from bot.core.token_tables import token_entries

_TEAM = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A team or enterprise id: no `:`, which would let a team name reach into another's keys."""
_USER = re.compile(r"[A-Za-z0-9_.@+-]{1,128}")
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
    entries = token_entries(raw, TokenError, '{"<token>": {"team": "T1", "user": "U1"}}')
    if entries is None:
        return None
    return TokenTable({token: _caller(value, where) for token, value, where in entries})


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
