"""How every operator command prints: a readable table, or `--json` as JSON lines.

One convention for all of them (`bot approvals`, `bot grants`, `bot turns`, `bot cancel`,
`bot reset`, `bot receipts list`, and `bot feedback --format jsonl` before them): `--json`
prints one JSON object per line, one per item listed, or one for what a command did; nothing
else goes to stdout. An empty listing prints nothing (the table's "no ..." line is for people).
Times are ISO 8601 in UTC; ages and durations are seconds (floats). Errors go to stderr as one
line, whichever the format.

Exit codes, each command's `--help` saying its own (`exit_codes`): 0 done; 1 done, and it found
something a script should notice (`bot turns --stuck` listed a stuck turn, `bot cancel` found
nothing left to cancel, `bot reset` was queued but not applied in time, `bot grants --revoke`
found the grant no longer live, `bot check` listed a turn under another agent); 2 a usage or
configuration error (a bad argument, an unknown session, turn or grant, a database that cannot
be reached, does not exist or is not migrated).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any


def exit_codes(*, one: str | None = None, usage: str = "") -> str:
    """The `--help` epilog every operator command shows: `one`, when it exits 1 (None: it never
    does); `usage`, its own usage errors beside the common ones."""
    return (
        "exit codes: 0 done; "
        + (f"1 {one}; " if one else "never 1; ")
        + "2 a usage or configuration error, told in one line (a bad argument, "
        + (f"{usage}, " if usage else "")
        + "the database unreachable, missing or not migrated)."
    )


class OperatorError(Exception):
    """A usage error the command reports as one line (`bot <command>: <message>`), exit 2."""


def iso(timestamp: float | None) -> str | None:
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC).isoformat()


def duration(seconds: float | None) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`: an age read at a glance; `?` when unknown."""
    if seconds is None:
        return "?"
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    minutes, hours, days = whole // 60, whole // 3600, whole // 86400
    if whole < 3600:
        return f"{minutes}m"
    if whole < 86400:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{days}d{hours % 24:02d}h"


def one_line(text: str, width: int) -> str:
    """The text on one line, cut to `width` characters (a table cell)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def json_lines(records: Sequence[Mapping[str, Any]]) -> None:
    for record in records:
        sys.stdout.write(json.dumps(record, ensure_ascii=False, sort_keys=False) + "\n")
    sys.stdout.flush()


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Left-aligned columns, two spaces apart, under an upper-case header; the last column is
    not padded (a prompt or a link may be long)."""
    widths = [len(name) for name in columns]
    for row in rows:
        for index, cell in enumerate(row[:-1]):
            widths[index] = max(widths[index], len(cell))
    lines = [[name.upper() for name in columns], *rows]
    for line in lines:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(line[:-1])]
        sys.stdout.write("  ".join([*cells, line[-1]]).rstrip() + "\n")
    sys.stdout.flush()
