"""Installed workspaces' tokens encrypted at rest: their columns widened to hold the ciphertext.

A sealed token (`fernet:` and a Fernet token, `storage.installations.sealing`) is far longer
than the token (a 57-character bot token seals to 171 characters, an incoming webhook's URL to
over 200), and PostgreSQL enforces slack-sdk's `VARCHAR(200)`. The secret columns of
`slack_installations` and `slack_bots` become `TEXT`. Nothing is encrypted here (a migration
has no key): the first start of `bot serve`, `bot worker` or `bot clock` with
`TOKEN_ENCRYPTION_KEYS` seals the rows stored in plain text, and so does
`bot db rotate-token-key`.

Downgrading narrows them again, which fails on PostgreSQL while sealed tokens are stored (they
do not fit, and older code could not read them anyway).

Written out by hand so it keeps creating exactly what it created on the day it shipped.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None

_BOT = ("bot_token", "bot_refresh_token")
_SECRETS = {
    "slack_installations": (*_BOT, "user_token", "user_refresh_token", "incoming_webhook_url"),
    "slack_bots": _BOT,
}


def upgrade() -> None:
    for table, columns in _SECRETS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, type_=sa.Text(), existing_type=sa.String(200))


def downgrade() -> None:
    for table, columns in _SECRETS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, type_=sa.String(200), existing_type=sa.Text())
