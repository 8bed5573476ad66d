"""Multi-workspace installs: slack-sdk's installation, bot and OAuth state tables.

`slack_installations` and `slack_bots` hold each workspace's tokens (one row per install; the
newest wins), `slack_oauth_states` the one-time `state` of each install flow begun and not yet
finished. The columns are slack-sdk's own (`storage.installations.schema` builds them with its
table builders, and the schema-drift test holds this script equal to them).

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None

_S32 = sa.String(32)
_S200 = sa.String(200)


def upgrade() -> None:
    op.create_table(
        "slack_installations",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("client_id", _S32, nullable=False),
        sa.Column("app_id", _S32, nullable=False),
        sa.Column("enterprise_id", _S32),
        sa.Column("enterprise_name", _S200),
        sa.Column("enterprise_url", _S200),
        sa.Column("team_id", _S32),
        sa.Column("team_name", _S200),
        sa.Column("bot_token", _S200),
        sa.Column("bot_id", _S32),
        sa.Column("bot_user_id", _S32),
        sa.Column("bot_scopes", sa.String(1000)),
        sa.Column("bot_refresh_token", _S200),
        sa.Column("bot_token_expires_at", sa.DateTime()),
        sa.Column("user_id", _S32, nullable=False),
        sa.Column("user_token", _S200),
        sa.Column("user_scopes", sa.String(1000)),
        sa.Column("user_refresh_token", _S200),
        sa.Column("user_token_expires_at", sa.DateTime()),
        sa.Column("incoming_webhook_url", _S200),
        sa.Column("incoming_webhook_channel", _S200),
        sa.Column("incoming_webhook_channel_id", _S200),
        sa.Column("incoming_webhook_configuration_url", _S200),
        sa.Column("is_enterprise_install", sa.Boolean(), nullable=False),
        sa.Column("token_type", _S32),
        sa.Column("installed_at", sa.DateTime(), nullable=False),
    )
    op.create_index(
        "slack_installations_idx",
        "slack_installations",
        ["client_id", "enterprise_id", "team_id", "user_id", "installed_at"],
    )
    op.create_table(
        "slack_bots",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("client_id", _S32, nullable=False),
        sa.Column("app_id", _S32, nullable=False),
        sa.Column("enterprise_id", _S32),
        sa.Column("enterprise_name", _S200),
        sa.Column("team_id", _S32),
        sa.Column("team_name", _S200),
        sa.Column("bot_token", _S200),
        sa.Column("bot_id", _S32),
        sa.Column("bot_user_id", _S32),
        sa.Column("bot_scopes", sa.String(1000)),
        sa.Column("bot_refresh_token", _S200),
        sa.Column("bot_token_expires_at", sa.DateTime()),
        sa.Column("is_enterprise_install", sa.Boolean(), nullable=False),
        sa.Column("installed_at", sa.DateTime(), nullable=False),
    )
    op.create_index(
        "slack_bots_idx", "slack_bots", ["client_id", "enterprise_id", "team_id", "installed_at"]
    )
    op.create_table(
        "slack_oauth_states",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("state", _S200, nullable=False),
        sa.Column("expire_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("slack_oauth_states")
    op.drop_index("slack_bots_idx", table_name="slack_bots")
    op.drop_table("slack_bots")
    op.drop_index("slack_installations_idx", table_name="slack_installations")
    op.drop_table("slack_installations")
