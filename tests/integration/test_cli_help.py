"""Every command's `--help` says what the command does and which exit codes it uses, as the
"Run it" and "Operator commands" sections (docs/operations.md) promise, read from the installed
`bot` script run in a folder of its own (no settings, no database: help needs neither)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli.main import _parser

SCRIPT = Path(sys.executable).with_name("bot")


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every command and subcommand the parser knows, as typed (`receipts list`)."""
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(" ".join((*prefix, name)))
                found += _commands(sub, (*prefix, name))
    return found


COMMANDS = _commands(_parser())

ONE = {
    "turns": "1 with --stuck, when a stuck turn is listed",
    "cancel": "1 when nothing was left to cancel",
    "reset": "1 when the reset was queued but not applied",
    "check": "1 when a turn started under another agent fingerprint is listed",
    "demo": "1 (--engine) the turn did not end as scripted",
    "grants": "1 with --revoke, when the grant was no longer live",
}
"""The commands the docs (docs/operations.md) say exit 1, and when."""


def test_every_command_of_the_readme_is_there() -> None:
    assert set(COMMANDS) >= {
        "db upgrade", "db current", "serve", "socket", "worker", "sandbox", "clock", "demo",
        "approvals", "grants", "turns", "cancel", "reset", "receipts list", "receipts resolve",
        "check", "prune", "feedback",
    }  # fmt: skip


def _help(command: str, folder: Path) -> list[str]:
    """The help's paragraphs (argparse separates them by blank lines), each on one line."""
    done = subprocess.run(
        [str(SCRIPT), *command.split(), "--help"],
        cwd=folder,
        env={"PATH": os.environ["PATH"], "HOME": str(folder), "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), command
    return [" ".join(block.split()) for block in done.stdout.split("\n\n") if block.strip()]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_describes_the_command_and_its_exit_codes(command: str, tmp_path: Path) -> None:
    usage, described, *_, last = _help(command, tmp_path)
    assert usage.startswith(f"usage: bot {command} ")
    assert not described.startswith(("positional arguments:", "options:")), (
        f"`bot {command} --help` has no description"
    )
    assert last.startswith("exit codes: "), f"`bot {command} --help` states no exit codes"
    assert " 0 " in last, f"`bot {command} --help` omits exit code 0: {last}"
    assert " 2 " in last, f"`bot {command} --help` omits exit code 2: {last}"
    family = command.split()[0]
    if family in ONE:
        assert ONE[family] in last, last
    elif family not in ("serve", "socket", "worker", "clock", "sandbox", "db"):
        assert "never 1" in last, last
    assert list(tmp_path.iterdir()) == []  # help opens no database, makes no folder
