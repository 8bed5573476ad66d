"""Reminders and escalation of unanswered requests: `approval_timers` holds them beside expiries.

- `approval_timers.action`: `expire` (every row written before this revision), `remind` or
  `escalate`; the unique key becomes (session, kind, turn, request, action), so a request has at
  most one timer of each action.
- `approval_timers.answerers`: an escalation's answerers (JSON); NULL otherwise.
- `approval_timers.fired_at`: when a reminder or an escalation fired; NULL until then.

SQLite cannot alter a constraint in place, so the table is rebuilt there (batch mode); its rows
are copied as they are.
Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("approval_timers", recreate="auto") as batch:
        batch.add_column(sa.Column("action", sa.Text(), nullable=False, server_default="expire"))
        batch.add_column(sa.Column("answerers", sa.Text(), nullable=True))
        batch.add_column(sa.Column("fired_at", sa.Double(), nullable=True))
        batch.drop_constraint("uq_approval_timers_request", type_="unique")
        batch.create_unique_constraint(
            "uq_approval_timers_request_action",
            ["session_key", "kind", "turn_id", "request_id", "action"],
        )


def downgrade() -> None:
    with op.batch_alter_table("approval_timers", recreate="auto") as batch:
        batch.drop_constraint("uq_approval_timers_request_action", type_="unique")
        batch.execute(sa.text("DELETE FROM approval_timers WHERE action <> 'expire'"))
        batch.create_unique_constraint(
            "uq_approval_timers_request", ["session_key", "kind", "turn_id", "request_id"]
        )
        batch.drop_column("fired_at")
        batch.drop_column("answerers")
        batch.drop_column("action")
