"""A documented setting does what the documentation says: the configuration table (in
docs/operations.md, where the README links for it), `.env.example` and the code name the same
settings, and each one, set to a value other than its default, reaches what it configures
(`tests.bot.setting_checks`, one check per setting).

Documented and ignored was the failure this guards against: `ANTHROPIC_MAX_CONTEXT_TOKENS` and
`ANTHROPIC_LONG_CACHE` were read by the Anthropic adapter's own settings but never passed by the
bot, and one of them was missing from `.env.example`, the other from the table.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.bot.setting_checks import CHECKS
from tests.bot.setting_context import Ctx
from tests.unit.test_deploy_files import env_example, setting_names

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def in_code() -> set[str]:
    """Every environment name the bot and the example agent read (their settings classes)."""
    return set().union(*setting_names().values())


def in_docs() -> set[str]:
    """The names in the first column of the "Configuration" table (docs/operations.md)."""
    text = (ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("| `"):
            names.update(NAME.findall(line.split("|")[1]))
    return names


def test_the_docs_and_env_example_name_exactly_the_settings_the_code_reads() -> None:
    code = in_code()
    readme, example = in_docs(), set(env_example())
    assert not code - readme, f"add to docs/operations.md's settings table: {sorted(code - readme)}"
    assert not readme - code, f"the docs name what nothing reads: {sorted(readme - code)}"
    assert not code - example, f"add to .env.example: {sorted(code - example)}"
    assert not example - code, f".env.example lists what nothing reads: {sorted(example - code)}"


def test_every_setting_has_a_check() -> None:
    """No silent allow-list: a new setting needs its own entry in `CHECKS`."""
    code = in_code()
    assert not code - set(CHECKS), (
        f"give these a check in setting_checks.py: {sorted(code - set(CHECKS))}"
    )
    assert not set(CHECKS) - code, (
        f"checks for settings nothing reads: {sorted(set(CHECKS) - code)}"
    )


@pytest.fixture
async def ctx(
    monkeypatch: pytest.MonkeyPatch, sqlite_url: str, tmp_path: Path
) -> AsyncIterator[Ctx]:
    """No `.env` to read, and none of the settings set but what the check sets."""
    monkeypatch.chdir(tmp_path)
    for name in in_code():
        monkeypatch.delenv(name, raising=False)
    async with contextlib.AsyncExitStack() as stack:
        yield Ctx(env=monkeypatch, db_url=sqlite_url, tmp=tmp_path, stack=stack)


@pytest.mark.parametrize("name", sorted(CHECKS))
async def test_a_setting_reaches_what_it_configures(name: str, ctx: Ctx) -> None:
    await CHECKS[name](ctx)
