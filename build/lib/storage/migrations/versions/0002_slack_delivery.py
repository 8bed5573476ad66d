"""Slack delivery: per-session delivery cursor and lease, and every message posted.

Written out by hand (not imported from `storage.delivery.schema`) so it keeps creating exactly
what it created on the day it shipped.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "delivery_targets",
        sa.Column("session_key", sa.Text(), primary_key=True),
        sa.Column("team", sa.Text(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("thread_ts", sa.Text(), nullable=True),
        sa.Column("user_id", sa.Text(), nullable=True),
        sa.Column("cursor", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("active", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("activity", sa.BigInteger(), nullable=False, server_default="0"),
        sa.Column("lease_owner", sa.Text(), nullable=True),
        sa.Column("lease_expires_at", sa.Double(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.Double(), nullable=False, server_default="0"),
    )
    op.create_index("ix_delivery_targets_active", "delivery_targets", ["active"])
    op.create_index(
        "ix_delivery_targets_channel", "delivery_targets", ["team", "channel", "updated_at"]
    )
    op.create_table(
        "delivery_posts",
        sa.Column("post_key", sa.Text(), primary_key=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("channel", sa.Text(), nullable=False),
        sa.Column("thread_ts", sa.Text(), nullable=True),
        sa.Column("ts", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("mode", sa.Text(), nullable=False, server_default="stream"),
        sa.Column("body", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("opened_at", sa.Double(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.Double(), nullable=False, server_default="0"),
    )
    op.create_index(
        "ix_delivery_posts_session_turn", "delivery_posts", ["session_key", "turn_id", "kind"]
    )
    op.create_index("ix_delivery_posts_session_state", "delivery_posts", ["session_key", "state"])


def downgrade() -> None:
    op.drop_table("delivery_posts")
    op.drop_table("delivery_targets")
