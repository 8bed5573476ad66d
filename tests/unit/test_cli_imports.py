"""The command line imports only what the command it runs needs, checked in a fresh interpreter
by what `sys.modules` holds afterwards (no timing: `bench/cli_startup.py` measures the time).

- Importing `bot.cli.main` imports neither the Anthropic SDK, nor Bolt or the Slack SDK, nor the web
  server; reading any command's arguments (`--help`) imports neither the engine, nor pydantic,
  nor SQLAlchemy: help and usage errors answer at once.
- An operator command on SQLite imports no Slack, Anthropic or web-server code, no Alembic, no
  PostgreSQL driver and no SQLAlchemy ORM; `bot db current` not the stores either.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

APP = ("anthropic", "slack_bolt", "slack_sdk", "uvicorn", "aiohttp")
"""What only `serve`, `socket`, `worker`, `clock` and the demos use."""
ENGINE = ("agent", "storage", "pydantic", "pydantic_settings", "sqlalchemy", "jsonschema")


def _imported_after(code: str, roots: tuple[str, ...]) -> list[str]:
    """Which of `roots` (top-level packages, or dotted modules) a fresh interpreter holds after
    running `code`."""
    probe = (
        f"{code}\n"
        "import json, sys\n"
        f"roots = {list(roots)!r}\n"
        "print(json.dumps(sorted(r for r in roots if r in sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_importing_the_command_line_imports_no_app() -> None:
    assert _imported_after("import bot.cli.main", APP + ENGINE) == []


@pytest.mark.parametrize(
    "command", [[], ["approvals"], ["cancel"], ["receipts", "resolve"], ["prune"], ["serve"]]
)
def test_reading_the_arguments_imports_neither_engine_nor_app(command: list[str]) -> None:
    code = (
        "import contextlib, io\n"
        "from bot.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({[*command, '--help']!r})\n"
    )
    assert _imported_after(code, APP + ENGINE) == []


def test_an_operator_command_on_sqlite_imports_only_what_it_uses(sqlite_url: str) -> None:
    code = (
        "import contextlib, io\n"
        "from bot.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['approvals', '--database-url', {sqlite_url!r}]) == 0\n"
    )
    unused = (*APP, "alembic", "psycopg", "sqlalchemy.orm", "storage.memory.store")
    assert _imported_after(code, unused) == []


def test_db_current_opens_no_store(sqlite_url: str) -> None:
    code = (
        "import contextlib, io\n"
        "from bot.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['db', 'current', '--database-url', {sqlite_url!r}]) == 0\n"
    )
    unused = (*APP, "alembic", "psycopg", "storage.sql.store", "storage.memory.store")
    assert _imported_after(code, unused) == []
