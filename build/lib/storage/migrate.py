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

A command that needs a database at this schema, and must not make one, checks first
(`require_database`): opening a store on a SQLite path that does not exist creates the file (and
its folder), and on an empty file switches it to WAL, before `verify_schema` can refuse it. The
check reads the file as it is (`mode=rw`: never created, and a read writes no journal), so a
mistyped path, or the default `./data/bot.db` seen from another folder, is named in one line and
left as it was.
"""

from __future__ import annotations

import ast
import asyncio
import functools
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import quote

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.pool import NullPool

from agent.seams import SchemaMismatchError, StoreUnavailableError
from storage.sql.dialects import SQLITE_BUSY_TIMEOUT_MS, dialect_for
from storage.sql.errors import database_label, unavailable_error
from storage.sql.schema import metadata

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
UPGRADE_COMMAND = "bot db upgrade"

if TYPE_CHECKING:
    from alembic.config import Config

R = TypeVar("R")


class DatabaseUrlError(ValueError):
    """A database URL this package cannot open: unreadable, or a scheme it does not support.

    The message says why in one line and never repeats the URL: where a URL is malformed, its
    password may be anywhere in it, so nothing of it is safe to print.
    """


def parse_database_url(url: str) -> URL:
    """The URL as SQLAlchemy reads it, if it names a database this package opens; else
    `DatabaseUrlError`."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseUrlError(
            "it cannot be read as a URL (sqlite:///path or postgresql+psycopg://user@host/db)"
        ) from None
    except ValueError:  # the only other thing SQLAlchemy's parser checks
        raise DatabaseUrlError("its port is not a number") from None
    try:
        dialect_for(parsed)
    except ValueError as err:
        raise DatabaseUrlError(str(err)) from None
    return parsed


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


@dataclass(frozen=True, kw_only=True)
class SchemaUpgrade:
    """What `upgrade_database` did, for the operator who ran it: the revision the database was
    at (None: no schema yet) and the one it is at now (equal: nothing to do)."""

    before: str | None
    after: str | None
    database: str
    """The database's URL, its password hidden."""


async def upgrade_database(url: str) -> SchemaUpgrade:
    """Bring the database at `url` to the newest revision; a no-op when it is already there.

    A database at a revision the scripts do not know (migrated by newer code) is refused with
    `SchemaMismatchError`, as opening a store refuses it, and left unchanged."""
    dialect = dialect_for(parse_database_url(url))
    executor = dialect.executor()
    try:
        before, after = await executor.write(_upgrade)
    finally:
        await executor.close()
    return SchemaUpgrade(before=before, after=after, database=dialect.label)


def _upgrade(connection: Connection) -> tuple[str | None, str | None]:
    from alembic import command

    before = _read_revision(connection)
    if before is not None and before not in script_revisions():
        raise _unknown_revision(before)
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
    return before, _read_revision(connection)


async def current_revision(url: str) -> str | None:
    """The revision the database at `url` is at, or None if it was never migrated.

    A SQLite file is read as it is, never created (`StoreUnavailableError` if it does not
    exist) nor switched to WAL: asking which revision a database is at changes nothing."""
    parsed = parse_database_url(url)
    path = sqlite_file(parsed)
    if path is not None:
        return await asyncio.to_thread(_read_sqlite, path, database_label(parsed), _read_revision)
    executor = dialect_for(parsed).executor()
    try:
        return await executor.read(_read_revision)
    finally:
        await executor.close()


async def require_database(url: str) -> None:
    """Before a command that needs the database at this code's schema, and must not make one:
    `DatabaseUrlError` for a URL it cannot open, `StoreUnavailableError` for a SQLite file that
    does not exist, `SchemaMismatchError` (naming `bot db upgrade`) for one below the schema.
    Nothing is created or changed. A server database is left to `SqlStore.open`, which
    creates nothing there either and makes the same checks."""
    parsed = parse_database_url(url)
    path = sqlite_file(parsed)
    if path is not None:
        await asyncio.to_thread(_read_sqlite, path, database_label(parsed), verify_schema)


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL names, made absolute the way SQLite opens it (from the working
    directory); None for another database, an in-memory one or a `file:` URI."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database).absolute()


def _read_sqlite(path: Path, label: str, read: Callable[[Connection], R]) -> R:
    """`read` on the existing file at `path`, without the store's setup (WAL, BEGIN
    IMMEDIATE): a connection that may write but does not create (`mode=rw`), and reads only."""
    if not path.exists():  # what is there but no database (a folder) is the driver's to say
        raise StoreUnavailableError(
            f"cannot reach the database {label}: {path} does not exist (check the path; "
            f"`{UPGRADE_COMMAND}` creates a database there)"
        )
    address = f"file:{quote(str(path))}?mode=rw"
    timeout = SQLITE_BUSY_TIMEOUT_MS / 1000
    engine = create_engine(
        "sqlite+pysqlite://",
        creator=lambda: sqlite3.connect(address, uri=True, timeout=timeout),
        poolclass=NullPool,
    )
    try:
        with engine.connect() as connection:
            return read(connection)
    except DBAPIError as err:  # not a database, unreadable, locked past the busy timeout
        raise unavailable_error(label, err) from None
    finally:
        engine.dispose()


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
        raise _unknown_revision(revision)
    raise SchemaMismatchError(f"{problem}; run `{UPGRADE_COMMAND}`.")


def _unknown_revision(revision: str) -> SchemaMismatchError:
    return SchemaMismatchError(
        f"the database schema is at revision {revision!r}, which this code does not know "
        f"(it needs {head_revision()}): it was probably migrated by newer code, which is the "
        "code to deploy (no migration of this code's can go back from there)."
    )
