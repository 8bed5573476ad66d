"""What the command line does with the database it is pointed at, run as an operator runs it:
the installed `bot` script, from a folder of its own (no `.env`, no `./data`), on SQLite and
PostgreSQL.

- A malformed `DATABASE_URL` or `--database-url`: one line saying which and why, never the
  URL itself (a password may sit anywhere in a malformed one), exit 2.
- A host that does not resolve: one line, the password hidden, exit 2.
- A SQLite file that does not exist, for every command but `bot db upgrade` (which makes it)
  and the demos (which make their own): one line naming the file, exit 2, and no file nor
  folder made (a mistyped path, or `bot approvals` run from another folder against the default
  `./data/bot.db`, used to leave an empty database behind and then say "run bot db upgrade").
- An empty database: one line naming `bot db upgrade`, exit 2, the database left as it was
  (on SQLite, not even switched to WAL).
- `bot db upgrade` says what it did: created at revision X, upgraded A → B, or already at X.
- `bot demo --engine` runs on a fresh file of its own, as its help says.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from storage.migrate import alembic_config, head_revision

SCRIPT = Path(sys.executable).with_name("bot")
SECRET = "s3cret-pw"

TOKENS = {
    "SLACK_BOT_TOKEN": "xoxb-test-token-0000",
    "SLACK_SIGNING_SECRET": "signing-secret-0000",
    "SLACK_APP_TOKEN": "xapp-test-token-0000",
    "ANTHROPIC_API_KEY": "sk-ant-test-key-0000",
}
"""Enough for the long-running commands to get past their settings check to the database."""

NEEDS_A_DATABASE = {
    "approvals": ["approvals"],
    "turns": ["turns", "--stuck"],
    "cancel": ["cancel", "slack:T1:C1:1.000001"],
    "reset": ["reset", "slack:T1:C1:1.000001", "--wait", "1"],
    "receipts list": ["receipts", "list"],
    "receipts resolve": ["receipts", "resolve", "s1", "tool:key", "--failed"],
    "check": ["check"],
    "feedback": ["feedback"],
    "prune": ["prune", "--older-than", "30d", "--dry-run"],
    "db current": ["db", "current"],
    "worker": ["worker"],
    "clock": ["clock"],
    "serve": ["serve"],
    "socket": ["socket"],
}
"""Every command that works on an existing database (all but `db upgrade` and the demos)."""


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str

    def one_line_error(self, command: str) -> str:
        """The command failed as promised: exit 2, one line on stderr, no traceback."""
        assert self.returncode == 2, (command, self.stdout, self.stderr)
        assert "Traceback" not in self.stderr + self.stdout, self.stderr
        lines = self.stderr.strip().splitlines()
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"bot {command}: "), lines[0]
        return lines[0]


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    """The folder the operator runs the command from: not the checkout, and empty."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def bot(folder: Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    """The installed console script, as a person runs it, with none of this process's settings
    (only PATH and a HOME of its own), from `folder`."""
    home = folder.parent / "home"
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(SCRIPT), *args],
        cwd=folder,
        env={"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def _sqlite_files(path: Path) -> dict[str, int]:
    """The database file and its journals, with their sizes."""
    return {p.name: p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name)}


# -- malformed URLs, wrong hosts ------------------------------------------------------------------

MALFORMED = {
    "not a URL": "not a url at all",
    "a port that is no number": f"postgresql+psycopg://agent:{SECRET}@db.example:port/bot",
    "an unsupported scheme": f"mysql://agent:{SECRET}@db.example/bot",
}


@pytest.mark.parametrize(
    ("command", "shape"),
    [("approvals", shape) for shape in MALFORMED]
    + [(command, "a port that is no number") for command in ("db upgrade", "db current", "worker")],
)
def test_a_malformed_database_url_is_one_line_and_exit_2(
    shape: str, command: str, elsewhere: Path
) -> None:
    done = bot(
        elsewhere,
        *NEEDS_A_DATABASE.get(command, command.split()),
        env={
            **TOKENS,
            "DATABASE_URL": MALFORMED[shape],
        },
    )
    line = done.one_line_error(command)
    assert "DATABASE_URL" in line
    assert SECRET not in done.stdout + done.stderr
    assert list(elsewhere.iterdir()) == []


def test_a_malformed_database_url_option_is_named_as_the_option(elsewhere: Path) -> None:
    done = bot(elsewhere, "approvals", "--database-url", MALFORMED["a port that is no number"])
    line = done.one_line_error("approvals")
    assert "--database-url" in line
    assert "port" in line
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("command", ["approvals", "db upgrade"])
def test_a_host_that_does_not_resolve_is_one_line_and_exit_2(command: str, elsewhere: Path) -> None:
    url = f"postgresql+psycopg://agent:{SECRET}@no-such-host.invalid/bot"
    done = bot(
        elsewhere, *NEEDS_A_DATABASE.get(command, command.split()), env={"DATABASE_URL": url}
    )
    line = done.one_line_error(command)
    assert "cannot reach the database postgresql+psycopg://agent:***@no-such-host.invalid/bot" in (
        line
    )
    assert SECRET not in done.stdout + done.stderr


# -- SQLite: a file that does not exist ------------------------------------------------------------


@pytest.mark.parametrize("command", list(NEEDS_A_DATABASE))
def test_a_missing_sqlite_file_is_named_and_nothing_is_created(
    command: str, elsewhere: Path
) -> None:
    """A mistyped path: one line naming the file, and neither it nor its folder appears."""
    url = "sqlite+aiosqlite:///./nested/typo.db"
    done = bot(elsewhere, *NEEDS_A_DATABASE[command], env={**TOKENS, "DATABASE_URL": url})
    line = done.one_line_error(command)
    assert f"{elsewhere}/nested/typo.db" in line
    assert "does not exist" in line
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("command", ["approvals", "db current"])
def test_the_default_database_seen_from_another_folder_is_not_created(
    command: str, elsewhere: Path
) -> None:
    """No DATABASE_URL: the default `./data/bot.db` is relative to where the command runs."""
    done = bot(elsewhere, *NEEDS_A_DATABASE[command])
    line = done.one_line_error(command)
    assert f"{elsewhere}/data/bot.db" in line
    assert not (elsewhere / "data").exists()


# -- empty databases ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["approvals", "cancel", "receipts resolve", "check", "feedback", "prune", "worker", "socket"],
)
def test_an_empty_sqlite_file_names_the_upgrade_and_is_left_as_it_was(
    command: str, elsewhere: Path
) -> None:
    path = elsewhere / "bot.db"
    path.touch()
    url = f"sqlite+aiosqlite:///{path}"
    done = bot(elsewhere, *NEEDS_A_DATABASE[command], env={**TOKENS, "DATABASE_URL": url})
    line = done.one_line_error(command)
    assert "`bot db upgrade`" in line
    assert _sqlite_files(path) == {"bot.db": 0}  # no schema, no WAL switch, no journal left


def test_db_current_on_an_empty_sqlite_file_says_so_and_leaves_it(elsewhere: Path) -> None:
    path = elsewhere / "bot.db"
    path.touch()
    done = bot(elsewhere, "db", "current", "--database-url", f"sqlite:///{path}")
    assert (done.returncode, done.stdout) == (0, "(empty database)\n"), done.stderr
    assert _sqlite_files(path) == {"bot.db": 0}


@pytest.fixture
def empty_postgres(postgres_database: str) -> Iterator[str]:
    """A never-migrated PostgreSQL database of this test's own."""
    base = make_url(postgres_database)
    name = f"{base.database}_e{secrets.token_hex(3)}"
    admin = base.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _postgres_tables(url: str) -> list[str]:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
        ).fetchall()
    return sorted(row[0] for row in rows)


@pytest.mark.parametrize("command", ["approvals", "turns", "cancel", "check", "prune", "worker"])
def test_an_empty_postgres_database_names_the_upgrade_and_is_left_as_it_was(
    command: str, elsewhere: Path, empty_postgres: str
) -> None:
    done = bot(
        elsewhere,
        *NEEDS_A_DATABASE[command],
        env={
            **TOKENS,
            "DATABASE_URL": empty_postgres,
        },
    )
    line = done.one_line_error(command)
    assert "`bot db upgrade`" in line
    assert _postgres_tables(empty_postgres) == []


BOTH = pytest.mark.postgres
"""The PostgreSQL half of a test that takes its database lazily (`request.getfixturevalue`)."""


# -- bot db upgrade says what it did --------------------------------------------------------------


def _migrate_to(url: str, revision: str) -> None:
    """The database as older code left it (a sync engine: this test has no event loop)."""
    from alembic import command

    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
    finally:
        engine.dispose()


def _upgrades(folder: Path, url: str) -> None:
    head = head_revision()
    first = bot(folder, "db", "upgrade", "--database-url", url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"created the schema at revision {head}"), first.stdout
    again = bot(folder, "db", "upgrade", "--database-url", url)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"the schema is already at revision {head}"), again.stdout
    assert bot(folder, "db", "current", "--database-url", url).stdout == f"{head}\n"


def test_db_upgrade_says_it_created_a_sqlite_schema_then_that_it_is_current(
    elsewhere: Path,
) -> None:
    _upgrades(elsewhere, "sqlite+aiosqlite:///./data/bot.db")
    assert (elsewhere / "data" / "bot.db").exists()


def test_db_upgrade_says_it_created_a_postgres_schema_then_that_it_is_current(
    elsewhere: Path, empty_postgres: str
) -> None:
    _upgrades(elsewhere, empty_postgres)


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=BOTH)])
def test_db_upgrade_says_from_which_revision_to_which(
    database: str, elsewhere: Path, request: pytest.FixtureRequest
) -> None:
    if database == "sqlite":
        url = f"sqlite:///{elsewhere / 'old.db'}"
    else:
        url = request.getfixturevalue("empty_postgres")
    _migrate_to(url, "0005")
    done = bot(elsewhere, "db", "upgrade", "--database-url", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"upgraded the schema from revision 0005 to {head_revision()}")


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=BOTH)])
def test_db_upgrade_of_a_schema_newer_than_the_code_is_one_line(
    database: str, elsewhere: Path, request: pytest.FixtureRequest
) -> None:
    """Migrated by newer code (a rollback deployed older code): refused, nothing changed."""
    if database == "sqlite":
        url = f"sqlite:///{elsewhere / 'newer.db'}"
    else:
        url = request.getfixturevalue("empty_postgres")
    _migrate_to(url, "head")
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("update alembic_version set version_num = '9999'"))
    finally:
        engine.dispose()
    line = bot(elsewhere, "db", "upgrade", "--database-url", url).one_line_error("db upgrade")
    assert "'9999'" in line
    assert "newer code" in line


# -- the engine demo ----------------------------------------------------------------------------


def test_the_engine_demo_runs_on_a_fresh_file_of_its_own(elsewhere: Path) -> None:
    """Its help says a fresh SQLite file; it used to write the default `./data/bot.db`."""
    done = bot(elsewhere, "demo", "--engine")
    assert done.returncode == 0, done.stderr
    assert "completed" in done.stdout
    assert list(elsewhere.iterdir()) == []
    again = bot(elsewhere, "demo", "--engine")  # a fresh file again: the same story
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("turn.started") == done.stdout.count("turn.started")


def test_the_engine_demo_uses_the_database_it_is_given(elsewhere: Path) -> None:
    path = elsewhere / "mine.db"
    done = bot(elsewhere, "demo", "--engine", "--database-url", f"sqlite:///{path}")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(path) as conn:
        assert conn.execute("select count(*) from turns").fetchone() == (1,)
