"""The operator console: when each step and event was written, and who did what in the console.

`steps.created_at` and `events.created_at` (epoch seconds, nullable: rows from before this
revision have none) give the console's timeline its times and each step its duration (the time
since the previous step of its turn). Their archive twins get the column too, since a reset
copies every live column into the archive. `console_audit` is the durable record of every
console action (a login, ok or failed, a logout, a receipt resolved, a turn cancelled): who (the
operator's name, never a token), when, what, on what, and a JSON detail. `ix_turns_status_created`
serves the queries across sessions by status (the metrics' queued-turns gauge, stuck turns).

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None

_STAMPED = ("steps", "events", "archived_steps", "archived_events")


def upgrade() -> None:
    for table in _STAMPED:
        op.add_column(table, sa.Column("created_at", sa.Double(), nullable=True))
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "console_audit",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("who", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
    )
    op.create_index("ix_console_audit_at", "console_audit", ["at"])
    op.create_index("ix_turns_status_created", "turns", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_turns_status_created", table_name="turns")
    op.drop_index("ix_console_audit_at", table_name="console_audit")
    op.drop_table("console_audit")
    for table in reversed(_STAMPED):
        # SQLite drops a column by copying the table; batch mode does that where it must.
        with op.batch_alter_table(table) as batch:
            batch.drop_column("created_at")
