"""Retention for the Slack delivery tables: what a prune may drop of what the renderer kept.

Only the bodies of reply messages that are done (`closed`, `empty`, `deleted`) go: the text a
restarted renderer would put back into a message still open, which a finished message never
needs again. Every row stays, with its key, `ts` and state, because the rows are more than a
copy of the text: a row's key is what makes a one-off notice post once however often Slack
delivers its event, its `ts` is how a lost stream start is told apart from the bot's older
messages in the thread, and a feedback click is checked against the reply's `ts` and channel.
Approval posts keep their bodies too: a late click on one is answered from it. Targets are
never pruned: `cursor` is how far the session's log was shown, and a target made again from
nothing would start at 0 and show the thread's newer replies a second time.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.engine import Connection

from storage.delivery.bodies import EMPTY_BODY
from storage.delivery.schema import delivery_posts, delivery_targets

DONE_STATES = ("closed", "empty", "deleted")


def cursors(conn: Connection, sessions: Sequence[str]) -> dict[str, int]:
    t = delivery_targets.c
    rows = conn.execute(select(t.session_key, t.cursor).where(t.session_key.in_(sessions)))
    return {row.session_key: int(row.cursor) for row in rows}


def _done(before: float) -> list[ColumnElement[bool]]:
    p = delivery_posts.c
    return [
        p.kind == "reply",
        p.state.in_(DONE_STATES),
        p.updated_at < before,
        p.body != EMPTY_BODY,
    ]


def picked_posts(conn: Connection, before: float, after: str, limit: int) -> list[str]:
    p = delivery_posts.c
    query = (
        select(p.post_key)
        .where(p.post_key > after, *_done(before))
        .order_by(p.post_key)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def strip_bodies(conn: Connection, keys: Sequence[str], before: float, dry_run: bool) -> int:
    """Conditions checked again in the statement that changes the rows: a post reopened since
    it was picked is left as it is."""
    p = delivery_posts.c
    where = [p.post_key.in_(keys), *_done(before)]
    if dry_run:
        counted = select(func.count()).select_from(delivery_posts).where(*where)
        return int(conn.execute(counted).scalar_one())
    stripped = update(delivery_posts).where(*where).values(body=EMPTY_BODY)
    return int(conn.execute(stripped).rowcount)
