"""Initial schema: sessions, turns, messages, steps, events.

Written out by hand rather than imported from `storage.sql_schema`: a migration must keep creating
exactly what it created on the day it shipped, whatever the live schema module says later.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_ROW_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("key", sa.Text(), primary_key=True),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_epoch", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("lease_expires_at", sa.Double(), nullable=False, server_default="0"),
        sa.Column("event_seq", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("pending", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False, server_default="0"),
    )
    op.create_table(
        "turns",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("input", sa.Text(), nullable=False),
        sa.Column("result", sa.Text(), nullable=True),
        sa.Column("cancel_reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.UniqueConstraint("session_key", "turn_id", name="uq_turns_session_turn"),
    )
    op.create_index("ix_turns_session_status_id", "turns", ["session_key", "status", "id"])
    op.create_table(
        "messages",
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("idx", sa.Integer(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "idx", name="pk_messages"),
    )
    op.create_table(
        "steps",
        sa.Column("id", _ROW_ID, primary_key=True, autoincrement=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("step_id", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.UniqueConstraint("session_key", "step_id", name="uq_steps_session_step"),
    )
    op.create_index("ix_steps_session_turn_id", "steps", ["session_key", "turn_id", "id"])
    op.create_table(
        "events",
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("session_key", "seq", name="pk_events"),
    )


def downgrade() -> None:
    for table in ("events", "steps", "messages", "turns", "sessions"):
        op.drop_table(table)
