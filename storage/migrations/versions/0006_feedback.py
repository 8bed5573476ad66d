"""Feedback on the bot's answers: the 👍 / 👎 buttons under a final reply in Slack.

One row per person and answer (session, turn, the person's workspace and user id); a later
click by the same person on the same answer replaces the earlier one, since Slack's feedback
buttons toggle. Exported by `bot feedback`.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0006
Revises: 0004 (0005, the approval timers, is being written beside it; this moves onto it then)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "slack_feedback",
        sa.Column("session_key", sa.Text(), primary_key=True),
        sa.Column("turn_id", sa.Text(), primary_key=True),
        sa.Column("team", sa.Text(), primary_key=True),
        sa.Column("user_id", sa.Text(), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("clicked_at", sa.Double(), nullable=False),
    )
    op.create_index("ix_slack_feedback_clicked_at", "slack_feedback", ["clicked_at"])


def downgrade() -> None:
    op.drop_table("slack_feedback")
