"""The installation and OAuth state tables: slack-sdk's own, with the secret columns widened.

They are built by slack-sdk's own table builders, so its stores read and write them unchanged;
only the columns holding a secret (`SECRET_COLUMNS`) become `Text`, since they hold a sealed
value (`storage.installations.sealing`), longer than the token. Migration 0008 created the
tables by hand and 0009 widened those columns; the schema-drift test holds the migrations equal
to these definitions (a newer slack-sdk that changes a column fails that test instead of a
query in production).
"""

from __future__ import annotations

from typing import Any

from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import Column, Index, MetaData, Table, Text
from sqlalchemy.types import TypeEngine

INSTALLATIONS_TABLE = "slack_installations"
BOTS_TABLE = "slack_bots"
STATES_TABLE = "slack_oauth_states"

BOT_SECRETS = ("bot_token", "bot_refresh_token")
SECRET_COLUMNS: dict[str, tuple[str, ...]] = {
    INSTALLATIONS_TABLE: (
        *BOT_SECRETS,
        "user_token",
        "user_refresh_token",
        # Anyone holding it can post to its channel.
        "incoming_webhook_url",
    ),
    BOTS_TABLE: BOT_SECRETS,
}
"""Every column of slack-sdk's tables that holds a credential; the rest are ids, names, scopes
and times."""


def _with_secret_type(source: Table, metadata: MetaData, secret: TypeEngine[str]) -> Table:
    """`source` (a slack-sdk table) again in `metadata`, its secret columns of type `secret`."""
    names = SECRET_COLUMNS[source.name]
    columns: list[Column[Any]] = []
    for column in source.columns:
        copy = column._copy()
        if column.name in names:
            copy.type = secret
        columns.append(copy)
    indexes = [Index(i.name, *(c.name for c in i.columns)) for i in source.indexes]
    return Table(source.name, metadata, *columns, *indexes)


def token_tables(metadata: MetaData, secret: TypeEngine[str]) -> tuple[Table, Table]:
    """slack-sdk's installations and bots tables, with `secret` as their secret columns' type:
    `Text` here for the schema, `SealedText` in the store (which seals and opens them)."""
    scratch = MetaData()
    return (
        _with_secret_type(
            SQLAlchemyInstallationStore.build_installations_table(scratch, INSTALLATIONS_TABLE),
            metadata,
            secret,
        ),
        _with_secret_type(
            SQLAlchemyInstallationStore.build_bots_table(scratch, BOTS_TABLE), metadata, secret
        ),
    )


installation_metadata = MetaData()
slack_installations, slack_bots = token_tables(installation_metadata, Text())
slack_oauth_states = SQLAlchemyOAuthStateStore.build_oauth_states_table(
    installation_metadata, STATES_TABLE
)
INSTALLATION_TABLES = (slack_installations, slack_bots, slack_oauth_states)
