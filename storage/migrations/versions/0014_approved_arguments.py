"""Edit, then approve: the call as the approver changed it, stored with their answer.

`confirmations.approved_arguments` (JSON text) holds what an approval with edits ran instead of
the proposed `arguments`, so the audit keeps both; NULL for every answer given as proposed (and
every row from before this revision). Nullable, so older rows read back as they were.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("confirmations", sa.Column("approved_arguments", sa.Text(), nullable=True))


def downgrade() -> None:
    # SQLite drops a column by copying the table; batch mode does that where it must.
    with op.batch_alter_table("confirmations") as batch:
        batch.drop_column("approved_arguments")
