"""The installation and OAuth state tables, exactly as slack-sdk defines them.

They are built by slack-sdk's own table builders, so its stores read and write them unchanged;
migration 0008 creates them by hand, and the schema-drift test holds the two equal (a newer
slack-sdk that changes a column fails that test instead of a query in production).
"""

from __future__ import annotations

from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import MetaData

INSTALLATIONS_TABLE = "slack_installations"
BOTS_TABLE = "slack_bots"
STATES_TABLE = "slack_oauth_states"

installation_metadata = MetaData()
slack_installations = SQLAlchemyInstallationStore.build_installations_table(
    installation_metadata, INSTALLATIONS_TABLE
)
slack_bots = SQLAlchemyInstallationStore.build_bots_table(installation_metadata, BOTS_TABLE)
slack_oauth_states = SQLAlchemyOAuthStateStore.build_oauth_states_table(
    installation_metadata, STATES_TABLE
)
INSTALLATION_TABLES = (slack_installations, slack_bots, slack_oauth_states)
