"""Schema migrations: applied by an explicit command, verified every time a store opens.

The app never migrates on its own at start: with several web and worker processes, an automatic
upgrade would race, and a rollback to older code would run against a schema it does not know.
Instead `bot db upgrade` calls `upgrade_database`, and `SqlStore.open` calls `verify_schema`,
which refuses to run on any revision but the newest one among the shipped migration scripts.
"Newest" is read from the scripts themselves, so a revision added later (a `0002_...` with
`down_revision = "0001"`) needs no constant bumped anywhere: upgrade applies it, open requires it.

Alembic is configured in code (no alembic.ini): the scripts live inside the package, so an
installed wheel can migrate its own database. Alembic's machinery is synchronous; it runs as a
transaction body through the dialect's executor, so the same SQLite and PostgreSQL setup
(pragmas, BEGIN IMMEDIATE) applies to migrations as to the store.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from agent.seams import SchemaMismatchError
from storage.sql.dialects import dialect_for
from storage.sql.schema import metadata

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
UPGRADE_COMMAND = "bot db upgrade"


def alembic_config() -> Config:
    """An Alembic config pointing at the package's scripts; `connection` is set per run."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    return config


def head_revision() -> str | None:
    """The newest revision among the migration scripts: the one this code runs on."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


async def upgrade_database(url: str) -> None:
    """Bring the database at `url` to the newest revision; a no-op when it is already there."""
    executor = dialect_for(url).executor()
    try:
        await executor.write(_upgrade)
    finally:
        await executor.close()


def _upgrade(connection: Connection) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


async def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at, or None if it was never migrated."""
    executor = dialect_for(url).executor()
    try:
        return await executor.read(_read_revision)
    finally:
        await executor.close()


def _read_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def verify_schema(connection: Connection) -> None:
    """Raise `SchemaMismatchError` unless the database is at exactly the scripts' head revision.

    Checked once per `SqlStore.open`, so a misdeployed process stops at start with a message
    saying what to run, not mid-turn with a missing column.
    """
    directory = ScriptDirectory.from_config(alembic_config())
    head = directory.get_current_head()
    present = set(inspect(connection).get_table_names())
    revision = _read_revision(connection) if "alembic_version" in present else None
    missing = sorted(set(metadata.tables) - present)
    if revision == head and not missing:
        return
    if revision is None:
        problem = "the database has no schema yet"
    elif revision == head:
        raise SchemaMismatchError(
            f"the database is marked as revision {revision} but tables {', '.join(missing)} are "
            f"missing; restore them from a backup (`{UPGRADE_COMMAND}` cannot, it sees the "
            "schema as current) or start from an empty database and run it there."
        )
    elif any(script.revision == revision for script in directory.walk_revisions()):
        problem = f"the database schema is at revision {revision}, this code needs {head}"
    else:
        raise SchemaMismatchError(
            f"the database schema is at revision {revision!r}, which this code does not know "
            f"(it needs {head}): it was probably migrated by newer code. Deploy that code, or, "
            f"if the database is older than this code, run `{UPGRADE_COMMAND}`."
        )
    raise SchemaMismatchError(f"{problem}; run `{UPGRADE_COMMAND}`.")
