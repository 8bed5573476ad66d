"""Schema migrations: applied by an explicit command, verified every time a store opens.

The app never migrates on its own at start: with several web and worker processes, an automatic
upgrade would race, and a rollback to older code would run against a schema it does not know.
Instead `bot db upgrade` calls `upgrade_database`, and `SqlStore.open` calls `verify_schema`,
which refuses to run on any revision but the newest one among the shipped migration scripts.
"Newest" is read from the scripts themselves, so a revision added later (a `0002_...` with
`down_revision = "0001"`) needs no constant bumped anywhere: upgrade applies it, open requires it.

Alembic is configured in code (no alembic.ini): the scripts live inside the package, so an
installed wheel can migrate its own database. Only migrating imports it: verifying reads each
script's `revision` / `down_revision` itself (`script_revisions`, held equal to Alembic's view by
a test) and the `alembic_version` table with one select, because importing Alembic costs about
0.2 s of CPU and every process that opens a store verifies (each web and worker process, each
child a crash test starts). Alembic's machinery is synchronous; it runs as a
transaction body through the dialect's executor, so the same SQLite and PostgreSQL setup
(pragmas, BEGIN IMMEDIATE) applies to migrations as to the store.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from agent.seams import SchemaMismatchError
from storage.sql.dialects import dialect_for
from storage.sql.schema import metadata

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
UPGRADE_COMMAND = "bot db upgrade"

if TYPE_CHECKING:
    from alembic.config import Config


def alembic_config() -> Config:
    """An Alembic config pointing at the package's scripts; `connection` is set per run."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    return config


def script_revisions() -> dict[str, str | None]:
    """Each shipped script's `revision` and the `down_revision` it follows, read from the files
    (module-level literals, as Alembic writes them) without importing them or Alembic."""
    return dict(_read_scripts(MIGRATIONS_DIR))


@functools.cache
def _read_scripts(directory: Path) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for path in sorted((directory / "versions").glob("*.py")):
        values: dict[str, object] = {}
        for node in ast.parse(path.read_text(), filename=str(path)).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                target, value = node.target, node.value
            else:
                continue
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
                values[target.id] = ast.literal_eval(value)
        revision, down = values.get("revision"), values.get("down_revision")
        if not isinstance(revision, str) or not (down is None or isinstance(down, str)):
            raise RuntimeError(f"{path.name}: revision / down_revision are not plain strings")
        found[revision] = down
    return found


def head_revision() -> str | None:
    """The newest revision among the migration scripts: the one this code runs on (the one no
    other script follows)."""
    revisions = script_revisions()
    followed = set(revisions.values())
    heads = [revision for revision in revisions if revision not in followed]
    if len(heads) > 1:
        raise RuntimeError(f"the migration scripts have several heads: {sorted(heads)}")
    return heads[0] if heads else None


async def upgrade_database(url: str) -> None:
    """Bring the database at `url` to the newest revision; a no-op when it is already there."""
    executor = dialect_for(url).executor()
    try:
        await executor.write(_upgrade)
    finally:
        await executor.close()


def _upgrade(connection: Connection) -> None:
    from alembic import command

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
    if "alembic_version" not in inspect(connection).get_table_names():
        return None
    rows = connection.execute(text("select version_num from alembic_version")).scalars().all()
    if len(rows) > 1:
        raise SchemaMismatchError(f"the database is marked with several revisions: {rows}")
    return str(rows[0]) if rows else None


def verify_schema(connection: Connection) -> None:
    """Raise `SchemaMismatchError` unless the database is at exactly the scripts' head revision.

    Checked once per `SqlStore.open`, so a misdeployed process stops at start with a message
    saying what to run, not mid-turn with a missing column.
    """
    head = head_revision()
    present = set(inspect(connection).get_table_names())
    revision = _read_revision(connection)
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
    elif revision in script_revisions():
        problem = f"the database schema is at revision {revision}, this code needs {head}"
    else:
        raise SchemaMismatchError(
            f"the database schema is at revision {revision!r}, which this code does not know "
            f"(it needs {head}): it was probably migrated by newer code. Deploy that code, or, "
            f"if the database is older than this code, run `{UPGRADE_COMMAND}`."
        )
    raise SchemaMismatchError(f"{problem}; run `{UPGRADE_COMMAND}`.")
