"""A thread the API compacts is loaded from its newest compaction: the messages holding one
are marked, and indexed.

`messages.compaction`: true for an assistant message holding a compaction block with content
(the API's summary of the thread before it), NULL otherwise. A worker picking up a session whose
model compacts starts from the turn holding the newest one, found through
`ix_messages_compaction`, a partial index of the marked rows only (a handful per session), so
the read stays an index read however long the thread. `archived_messages.compaction`: the same
column, since a reset archives every column of `messages`.

Messages stored before this revision are marked here: one pass over the assistant messages
whose text names a compaction block, each body then read as JSON (the rule above, as it stood
on the day it shipped; no engine code is imported).

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None

_MARKED = "compaction IS NOT NULL"


def upgrade() -> None:
    op.add_column("messages", sa.Column("compaction", sa.Boolean(), nullable=True))
    op.add_column("archived_messages", sa.Column("compaction", sa.Boolean(), nullable=True))
    op.create_index(
        "ix_messages_compaction",
        "messages",
        ["session_key", "idx"],
        sqlite_where=sa.text(_MARKED),
        postgresql_where=sa.text(_MARKED),
    )
    _mark("messages", ("session_key", "idx"))
    _mark("archived_messages", ("session_key", "generation", "idx"))


def downgrade() -> None:
    op.drop_index("ix_messages_compaction", table_name="messages")
    with op.batch_alter_table("archived_messages") as batch:
        batch.drop_column("compaction")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("compaction")


def _mark(table: str, key: tuple[str, ...]) -> None:
    conn = op.get_bind()
    found = conn.execute(
        sa.text(
            f"SELECT {', '.join(key)}, body FROM {table} "
            "WHERE role = 'assistant' AND body LIKE '%\"compaction\"%'"
        )
    ).all()
    marked = [dict(zip(key, row[:-1], strict=True)) for row in found if _holds_compaction(row[-1])]
    if marked:
        where = " AND ".join(f"{column} = :{column}" for column in key)
        conn.execute(sa.text(f"UPDATE {table} SET compaction = true WHERE {where}"), marked)


def _holds_compaction(body: str) -> bool:
    content = json.loads(body).get("content") or []
    return any(
        isinstance(block, dict)
        and block.get("kind") == "compaction"
        and block.get("content") is not None
        for block in content
    )
