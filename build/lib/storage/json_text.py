"""JSON as the stores keep it: text, so SQLite, PostgreSQL and `MemoryStore` hold the same thing.

Compact separators and no ASCII escaping keep rows small; the store never queries inside them.
"""

from __future__ import annotations

import json

from agent.seams import JsonValue


def dump_json(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dump_or_null(value: JsonValue) -> str | None:
    """SQL NULL for a JSON null: a column that is optional reads back as None either way."""
    return None if value is None else dump_json(value)


def canonical_json(value: JsonValue) -> str:
    """One text per value (keys sorted), for JSON that is compared as text: a session's
    `pending`, which a resume must find unchanged since the resumer read it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def load_json(text: str | None) -> JsonValue:
    return None if text is None else json.loads(text)
