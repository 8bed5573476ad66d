"""Standing grants ("Approve, and allow this again"): one row per grant, one grant per approval.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (auto-increment).
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "standing_grants",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("grant_id", sa.Text(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("team", sa.Text(), nullable=False),
        sa.Column("enterprise", sa.Text(), nullable=True),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("channel", sa.Text(), nullable=True),
        sa.Column("speaker", sa.Text(), nullable=False),
        sa.Column("granted_by", sa.Text(), nullable=False),
        sa.Column("confirmation_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.Column("revoked_by", sa.Text(), nullable=True),
        sa.UniqueConstraint("grant_id", name="uq_standing_grants_grant_id"),
        sa.UniqueConstraint("session_key", "confirmation_id", name="uq_standing_grants_approval"),
    )
    op.create_index(
        "ix_standing_grants_team_tool_speaker", "standing_grants", ["team", "tool", "speaker"]
    )


def downgrade() -> None:
    op.drop_index("ix_standing_grants_team_tool_speaker", table_name="standing_grants")
    op.drop_table("standing_grants")
