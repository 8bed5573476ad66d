"""`MemoryStore`'s transcript tail, from the rows it keeps as `SqlStore` keeps them: the same
rule as `storage.sql.transcript`, on a list (a memory store holds one process's sessions)."""

from __future__ import annotations

from collections.abc import Sequence

from agent.seams import TranscriptTail, message_from_json
from storage.memory.state import Rows
from storage.records import OPENING_ROLES


def transcript_tail(rows: Sequence[Rows], at_least: int, since_compaction: bool) -> TranscriptTail:
    """`rows`: the live generation's messages in index order (contiguous from 0, so a row's
    position is its index)."""
    first: int | None = len(rows) - max(at_least, 1)
    if since_compaction:
        marked = (i for i in range(len(rows) - 1, -1, -1) if rows[i].get("compaction"))
        first = next(marked, None)
    base = 0
    if first is not None:
        for index in range(first, 0, -1):
            if rows[index]["role"] in OPENING_ROLES:
                base = index
                break
    return TranscriptTail(
        base=base, messages=[message_from_json(row["body"]) for row in rows[base:]]
    )
