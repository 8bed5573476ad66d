"""Addresses in the HTTP turn API: session keys, turn ids, and the store keys behind them.

A path's `{key}` names a session only inside the caller's team: it is stored as
`api:<team>:<key>`, so no key a caller can write reaches another team's session (or a Slack
thread's, `slack:...`). Keys and client-chosen turn ids take letters, digits and `._-` (keys
also `:`), at most 128 characters: nothing that could reach into another namespace, and never
a `:` in a turn id, so a client's id can never be one the engine makes itself
(`confirm:<id>`, `reset:<id>`, `cron:<name>:<time>`) and take its place.
"""

from __future__ import annotations

import re

PREFIX = "api"
_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_TURN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
KEY_PATTERN = _KEY.pattern
TURN_ID_PATTERN = _TURN_ID.pattern


def valid_key(key: str) -> bool:
    return _KEY.fullmatch(key) is not None


def valid_turn_id(turn_id: str) -> bool:
    return _TURN_ID.fullmatch(turn_id) is not None


def store_key(team: str, key: str) -> str:
    return f"{PREFIX}:{team}:{key}"


def api_key(team: str, stored: str) -> str:
    """The path key of a store key of `team` (the store key itself if it is not one)."""
    return stored.removeprefix(f"{PREFIX}:{team}:")
