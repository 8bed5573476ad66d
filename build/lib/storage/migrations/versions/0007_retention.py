"""Retention (`bot prune`): when each turn ended, and when its history was pruned.

`turns.finished_at`: stamped by the commit (or the reset) that ends a turn. A turn that ended
before this revision gets its session's last activity (`sessions.updated_at`, or its own
`created_at` if that is later): never earlier than it really ended, so no turn is pruned sooner
than its retention says.

`turns.pruned_at`: set when the turn's steps and events were removed; the row stays as the turn
id's tombstone. `ix_turns_pruned_id` lets a prune walk the turns not pruned yet in queue order.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("finished_at", sa.Double(), nullable=True))
    op.add_column("turns", sa.Column("pruned_at", sa.Double(), nullable=True))
    op.create_index("ix_turns_pruned_id", "turns", ["pruned_at", "id"])
    op.execute(
        """
        UPDATE turns SET finished_at = CASE
            WHEN (SELECT s.updated_at FROM sessions s WHERE s.key = turns.session_key)
                 > created_at
            THEN (SELECT s.updated_at FROM sessions s WHERE s.key = turns.session_key)
            ELSE created_at
        END
        WHERE status IN ('completed', 'failed', 'cancelled')
        """
    )


def downgrade() -> None:
    op.drop_index("ix_turns_pruned_id", table_name="turns")
    with op.batch_alter_table("turns") as batch:
        batch.drop_column("pruned_at")
        batch.drop_column("finished_at")
