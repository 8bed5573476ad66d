"""Issue 16, the Slack agent experience: approval expiry, who stopped a turn, reasons, and the
indexes behind who-may-answer-what.

- `approval_timers`: one row per request put to a person with a time limit (a park, a proposed
  write), committed with the request and deleted with its end; whichever process sweeps first
  applies a due one. The table is new, so nothing that exists expires.
- `turns.cancelled_by`: who asked a turn to stop (`AgentSession.stop(by=...)`).
- `turns.speaker`: the attested speaker as `<team>:<user>`, so a person's own recent turns can
  be listed across sessions (the store never queries inside the `input` JSON). NULL for turns
  queued before this revision: they are not listed.
- `confirmations.reason` and `confirmations.expires_at`: what the person said with an answer,
  and when a pending one expires.
- Indexes for the queries across sessions: parked sessions by status, pending confirmations by
  status, a speaker's turns newest first, timers by due time.

All columns are nullable, so rows written before this revision read back as they were.
Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (auto-increment).
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "approval_timers",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("due_at", sa.Double(), nullable=False),
        sa.Column("expires_after", sa.Double(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.UniqueConstraint(
            "session_key", "kind", "turn_id", "request_id", name="uq_approval_timers_request"
        ),
    )
    op.create_index("ix_approval_timers_due_at", "approval_timers", ["due_at"])
    op.add_column("turns", sa.Column("cancelled_by", sa.Text(), nullable=True))
    op.add_column("turns", sa.Column("speaker", sa.Text(), nullable=True))
    op.create_index("ix_turns_speaker_id", "turns", ["speaker", "id"])
    op.add_column("confirmations", sa.Column("reason", sa.Text(), nullable=True))
    op.add_column("confirmations", sa.Column("expires_at", sa.Double(), nullable=True))
    op.create_index("ix_confirmations_status_id", "confirmations", ["status", "id"])
    op.create_index("ix_sessions_status", "sessions", ["status"])


def downgrade() -> None:
    op.drop_index("ix_sessions_status", table_name="sessions")
    op.drop_index("ix_confirmations_status_id", table_name="confirmations")
    op.drop_index("ix_turns_speaker_id", table_name="turns")
    # SQLite drops a column by copying the table; batch mode does that where it must.
    with op.batch_alter_table("confirmations") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("reason")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("speaker")
        batch.drop_column("cancelled_by")
    op.drop_table("approval_timers")
