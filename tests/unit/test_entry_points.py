"""`python -m bot` is the `bot` console script: the same parser, the same commands, the same exit
codes. It is what works where the script is not on PATH (a venv not activated, a container that
runs the interpreter directly)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).with_name("bot")


def _run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "ANTHROPIC_"))}
    return subprocess.run(
        command,
        cwd=tmp_path,  # no .env from the checkout is read
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_console_script_is_installed() -> None:
    assert SCRIPT.exists(), f"{SCRIPT} is missing: install the project (`make install`)"


def test_python_m_bot_prints_the_same_help(tmp_path: Path) -> None:
    module = _run([sys.executable, "-m", "bot", "--help"], tmp_path)
    script = _run([str(SCRIPT), "--help"], tmp_path)
    assert module.returncode == script.returncode == 0, module.stderr
    assert module.stdout == script.stdout
    assert module.stdout.startswith("usage: bot ")


def test_python_m_bot_runs_an_offline_command(tmp_path: Path) -> None:
    (tmp_path / "empty.db").touch()  # `db current` reads a database, it never makes one
    url = f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}"
    module = _run([sys.executable, "-m", "bot", "db", "current", "--database-url", url], tmp_path)
    script = _run([str(SCRIPT), "db", "current", "--database-url", url], tmp_path)
    assert module.returncode == script.returncode == 0, module.stderr
    assert module.stdout == script.stdout == "(empty database)\n"


def test_python_m_bot_exits_as_the_script_does_on_a_missing_setting(tmp_path: Path) -> None:
    module = _run([sys.executable, "-m", "bot", "serve"], tmp_path)
    script = _run([str(SCRIPT), "serve"], tmp_path)
    assert module.returncode == script.returncode == 2
    assert module.stderr == script.stderr
    assert "SLACK_BOT_TOKEN" in module.stderr
