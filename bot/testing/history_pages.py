"""How the stand-in answers `conversations.history` and `conversations.replies`: in pages of at
most `page_size` messages whatever `limit` asks, bounded by `oldest` / `latest` (`inclusive`),
with `has_more` and an opaque `response_metadata.next_cursor`, as Slack's pagination does
(https://docs.slack.dev/apis/web-api/pagination). Apart from the stand-in so its paging rules can
be read, and tightened, on their own."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from bot.testing.workspace import Message


def page_of(ordered: list[Message], args: dict[str, Any], *, page_size: int) -> dict[str, Any]:
    """The page of `ordered` (already in the method's order) that `args` ask for."""
    inclusive = _truthy(args.get("inclusive"))
    oldest, latest = _ts_bound(args.get("oldest")), _ts_bound(args.get("latest"))
    if oldest is None or latest is None:
        return {
            "ok": False,
            "error": "invalid_ts_oldest" if oldest is None else "invalid_ts_latest",
        }
    kept = [
        m
        for m in ordered
        if (float(m.ts) > oldest or (inclusive and float(m.ts) == oldest))
        and (latest == 0 or float(m.ts) < latest or (inclusive and float(m.ts) == latest))
    ]
    start = 0
    if args.get("cursor"):
        start = _decode_cursor(str(args["cursor"]), kept)
        if start < 0:
            return {"ok": False, "error": "invalid_cursor"}
    try:
        limit = int(args.get("limit") or 1000)
    except ValueError:
        return {"ok": False, "error": "invalid_limit"}
    size = max(1, min(limit, page_size))
    page = kept[start : start + size]
    more = start + size < len(kept)
    with_metadata = _truthy(args.get("include_all_metadata"))
    out: dict[str, Any] = {
        "ok": True,
        "messages": [m.to_json(with_metadata=with_metadata) for m in page],
        "has_more": more,
    }
    next_cursor = _encode_cursor(kept[start + size].ts) if more else ""
    out["response_metadata"] = {"next_cursor": next_cursor}
    return out


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")


def _ts_bound(value: Any) -> float | None:
    if value in (None, ""):
        return 0.0
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _encode_cursor(ts: str) -> str:
    return base64.b64encode(f"next_ts:{ts}".encode()).decode()


def _decode_cursor(cursor: str, kept: list[Message]) -> int:
    """Where the page a cursor names starts; -1 for a cursor this stand-in never gave."""
    try:
        text = base64.b64decode(cursor, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return -1
    ts = text.removeprefix("next_ts:")
    if ts == text:
        return -1
    for index, message in enumerate(kept):
        if message.ts == ts:
            return index
    return -1
