"""Votes on requests that need several approvals (`Quorum`): one row per person and request.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (auto-increment).
    row_id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "approval_votes",
        sa.Column("id", row_id, primary_key=True, autoincrement=True),
        sa.Column("session_key", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("request_id", sa.Text(), nullable=False),
        sa.Column("voter", sa.Text(), nullable=False),
        sa.Column("approve", sa.Boolean(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("voted_at", sa.Double(), nullable=False),
        sa.UniqueConstraint(
            "session_key", "kind", "turn_id", "request_id", "voter", name="uq_approval_votes_voter"
        ),
    )


def downgrade() -> None:
    op.drop_table("approval_votes")
