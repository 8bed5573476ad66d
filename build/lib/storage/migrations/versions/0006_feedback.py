"""Feedback on the bot's answers (the 👍 / 👎 buttons under a final reply in Slack), and who
has a Home tab to keep fresh.

`slack_feedback`: one row per person and answer (session, turn, the person's workspace and user
id); a later click by the same person on the same answer replaces the earlier one, since
Slack's feedback buttons toggle. Exported by `bot feedback`.

`slack_home_viewers`: each person who opened the bot's Home tab (the approval inbox), with the
Enterprise Grid org their identity names, so the inbox is republished for them when a request
they may answer appears or goes.

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
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
    op.create_table(
        "slack_home_viewers",
        sa.Column("team", sa.Text(), primary_key=True),
        sa.Column("user_id", sa.Text(), primary_key=True),
        sa.Column("enterprise", sa.Text(), nullable=True),
        sa.Column("opened_at", sa.Double(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("slack_home_viewers")
    op.drop_table("slack_feedback")
