"""Alembic environment for the store's schema.

Only `storage.migrate` runs these scripts, and it always hands over an open connection (already
in a transaction, with the dialect's pragmas applied); there is no offline or URL-from-ini mode,
so a migration can never run against a database other than the one the caller opened.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from storage.sql.schema import metadata


def run_migrations() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise RuntimeError(
            "storage migrations run through storage.migrate.upgrade_database (`bot db upgrade`), "
            "not the alembic command line"
        )
    context.configure(connection=connection, target_metadata=metadata)
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
