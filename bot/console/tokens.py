"""Who may open the operator console: `CONSOLE_TOKENS`, a JSON object mapping each login token
to its operator, `{"<token>": {"name": "ana", "teams": ["T1"]}}`.

`teams` null or absent: the operator sees every workspace; a list: only the sessions of those
workspaces (`slack:<team>:...`, and the HTTP API's `api:<team>:...`), everywhere in the
console. Unset or blank: the console is off (every `/console` path answers 404).

Tokens are secrets: kept only as SHA-256 digests, compared in constant time against every
entry, scrubbed from logs (`Settings.secrets` lists each one), and never quoted in an error,
including the start-up error for a malformed setting.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass
from typing import Any

from pydantic import SecretStr

from bot.core.token_tables import token_entries

_NAME = re.compile(r"[A-Za-z0-9_.@+ -]{1,64}")
_TEAM = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""As `bot.api.auth`: no `:`, which would let a team reach into another's session keys."""
SESSION_PREFIXES = ("slack", "api")
"""The key families whose second part is the workspace (`bot.slack.inbound`, `bot.api.keys`)."""


class ConsoleTokenError(ValueError):
    """`CONSOLE_TOKENS` is malformed; the message says what is wrong, never quoting a token."""


@dataclass(frozen=True, kw_only=True)
class Operator:
    """A console login: its name (what the audit records) and the workspaces it may see."""

    id: str
    """A digest of its token: what a session cookie names (removing the token ends them)."""
    name: str
    teams: tuple[str, ...] | None

    @property
    def prefixes(self) -> list[str] | None:
        """The session-key prefixes this operator may see (None: every session)."""
        if self.teams is None:
            return None
        return [f"{family}:{team}:" for team in self.teams for family in SESSION_PREFIXES]

    def sees(self, key: str) -> bool:
        prefixes = self.prefixes
        return prefixes is None or any(key.startswith(p) for p in prefixes)


class ConsoleTokens:
    """The operators by token digest, and the key that signs their cookies."""

    def __init__(self, entries: dict[str, Operator]) -> None:
        self._entries = [(_digest(token), op) for token, op in entries.items()]
        self._by_id = {op.id: op for op in entries.values()}
        joined = "\n".join(sorted(entries))
        self.signing_key = hashlib.sha256(b"bot-console-session\n" + joined.encode()).digest()
        """Derived from every token, so each web process (`WEB_CONCURRENCY`, several hosts)
        signs and accepts the same cookies with no shared state, and changing the tokens ends
        every session."""

    def __len__(self) -> int:
        return len(self._entries)

    def login(self, presented: str) -> Operator | None:
        """The operator whose token this is, or None (every entry compared)."""
        digest = _digest(presented)
        match: Operator | None = None
        for known, op in self._entries:
            if hmac.compare_digest(digest, known):
                match = op
        return match

    def by_id(self, operator_id: str) -> Operator | None:
        return self._by_id.get(operator_id)


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def parse_console_tokens(raw: SecretStr | str | None) -> ConsoleTokens | None:
    """The tokens `CONSOLE_TOKENS` describes, or None when it is unset or blank (console off)."""
    entries = token_entries(raw, ConsoleTokenError, '{"<token>": {"name": "ana", "teams": ["T1"]}}')
    if entries is None:
        return None
    return ConsoleTokens({token: _operator(token, value, where) for token, value, where in entries})


def _operator(token: str, value: Any, where: str) -> Operator:
    if not isinstance(value, dict):
        raise ConsoleTokenError(f'{where}: expected {{"name": ..., "teams": [...] or null}}')
    unknown = set(value) - {"name", "teams"}
    if unknown:
        raise ConsoleTokenError(f"{where}: unknown keys {sorted(unknown)}")
    name, teams = value.get("name"), value.get("teams")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConsoleTokenError(f"{where}: name must be 1-64 letters, digits, spaces or '_.@+-'")
    if teams is not None and (
        not isinstance(teams, list)
        or not teams
        or not all(isinstance(t, str) and _TEAM.fullmatch(t) for t in teams)
    ):
        raise ConsoleTokenError(
            f"{where}: teams must be null (every workspace) or a non-empty list of team ids "
            "(1-64 letters, digits, '_' or '-')"
        )
    ident = hashlib.sha256(b"bot-console-operator\n" + token.encode()).hexdigest()[:32]
    return Operator(id=ident, name=name, teams=None if teams is None else tuple(teams))
