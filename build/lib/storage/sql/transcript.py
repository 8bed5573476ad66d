"""The transcript reads a worker makes when it picks a session up (`load_transcript_tail`).

Every read here is a bounded index range read, whatever the transcript's length: a resumed turn
waits on it, and sessions reach tens of thousands of messages. The newest compaction is found
through `ix_messages_compaction`, a partial index holding only the messages a commit marked
(`messages.compaction`, set for a message that `holds_compaction`): a handful per session.
"""

from __future__ import annotations

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import Connection

from agent.seams import Message, TranscriptTail, message_from_json
from storage.records import OPENING_ROLES
from storage.sql.schema import messages

# Built once (executing a prepared construct skips building it and deriving its cache key).
_IN_SESSION = messages.c.session_key == bindparam("b_session")
_LAST_INDEX = select(func.max(messages.c.idx)).where(_IN_SESSION)
_NEWEST_COMPACTION = (
    select(messages.c.idx)
    # Exactly the index's predicate, so both databases see the partial index applies.
    .where(_IN_SESSION, messages.c.compaction.is_not(None))
    .order_by(messages.c.idx.desc())
    .limit(1)
)
_OPENING_BEFORE = (
    select(messages.c.idx)
    .where(
        _IN_SESSION,
        messages.c.idx <= bindparam("b_first"),
        messages.c.role.in_(OPENING_ROLES),
    )
    .order_by(messages.c.idx.desc())
    .limit(1)
)
_MESSAGES_FROM = (
    select(messages.c.body)
    .where(_IN_SESSION, messages.c.idx >= bindparam("b_base"))
    .order_by(messages.c.idx)
)


def load_transcript(conn: Connection, session: str) -> list[Message]:
    query = (
        select(messages.c.body).where(messages.c.session_key == session).order_by(messages.c.idx)
    )
    return [message_from_json(body) for body in conn.execute(query).scalars()]


def load_transcript_tail(
    conn: Connection, session: str, at_least: int, *, since_compaction: bool = False
) -> TranscriptTail:
    """Index range reads on the primary key and the compaction index, none of which grows with
    the transcript: the message to start from (the window's first, or the newest compaction),
    the opening at or before it (a walk back over one turn at most), then the rows from there.
    The rows a compacting session reads are bounded by the API's compaction, not here."""
    if since_compaction:
        first = conn.execute(_NEWEST_COMPACTION, {"b_session": session}).scalar()
    else:
        last = conn.execute(_LAST_INDEX, {"b_session": session}).scalar()
        first = None if last is None else int(last) + 1 - max(at_least, 1)
    base = 0
    if first is not None and first > 0:
        opening = conn.execute(_OPENING_BEFORE, {"b_session": session, "b_first": first}).scalar()
        base = int(opening) if opening is not None else 0
    rows = conn.execute(_MESSAGES_FROM, {"b_session": session, "b_base": base}).scalars()
    return TranscriptTail(base=base, messages=[message_from_json(body) for body in rows])
