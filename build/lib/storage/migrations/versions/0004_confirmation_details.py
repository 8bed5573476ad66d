"""Confirmation details: what a `confirmation="capability"` tool showed with its own prompt.

The tool runs before the person is asked, gathers the domain details (an amount, the lines of an
order) and asks with them; the person approves those details, and the tool may write only if it
finds the same details when it runs again. So they are stored with the proposal, as JSON text,
NULL for a `confirmation="required"` proposal (its arguments are what is approved). Nullable, so
rows proposed before this revision read back as they were.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("confirmations", sa.Column("details", sa.Text(), nullable=True))


def downgrade() -> None:
    # SQLite drops a column by copying the table; batch mode does that where it must.
    with op.batch_alter_table("confirmations") as batch:
        batch.drop_column("details")
