"""The files a person deploys from say what the code reads and installs what pyproject asks for:
`.env.example` names every setting, `requirements.lock` pins every runtime dependency within
its range, and the dependency floors are releases the code runs on."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import AliasChoices

from bot.core.settings import Settings
from examples.ops_agent.config import OpsConfig

ROOT = Path(__file__).resolve().parents[2]
ENV_LINE = re.compile(r"^#?\s*([A-Z][A-Z0-9_]*)=(.*)$")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;\\]+)")


def _runtime_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(line) for line in project["dependencies"]]


def setting_names() -> dict[str, set[str]]:
    """Each setting's field and the environment names it is read from, from the settings classes
    themselves (the bot's and the example agent's), so a setting added there is checked here
    without anyone editing this test."""
    names: dict[str, set[str]] = {}
    fields = [
        (f"{cls.__name__}.{field}", info)
        for cls in (Settings, OpsConfig)
        for field, info in cls.model_fields.items()
    ]
    for field, info in fields:
        found: set[str] = set()
        if isinstance(info.alias, str):
            found.add(info.alias)
        alias = info.validation_alias
        if isinstance(alias, str):
            found.add(alias)
        elif isinstance(alias, AliasChoices):
            found.update(choice for choice in alias.choices if isinstance(choice, str))
        names[field] = {n.upper() for n in found} or {field.split(".")[-1].upper()}
    return names


def env_example() -> dict[str, str]:
    """`NAME=value` lines, commented out or not (an optional setting is shown commented)."""
    listed: dict[str, str] = {}
    for line in (ROOT / ".env.example").read_text().splitlines():
        found = ENV_LINE.match(line.strip())
        if found:
            listed[found.group(1)] = found.group(2)
    return listed


def test_env_example_lists_every_setting() -> None:
    listed = set(env_example())
    missing = {field: sorted(n) for field, n in setting_names().items() if not n & listed}
    assert not missing, f"add to .env.example: {missing}"


def test_env_example_lists_nothing_the_settings_do_not_read() -> None:
    known = set().union(*setting_names().values())
    assert set(env_example()) <= known


def test_env_example_holds_no_credential() -> None:
    """Placeholders only: a real token or key committed here would be public."""
    text = (ROOT / ".env.example").read_text()
    for shape in (r"xox[abeprs]-[0-9]", r"xapp-[0-9]", r"sk-ant-[A-Za-z0-9]", r"[0-9a-f]{32}"):
        assert not re.search(shape, text), shape
    listed = env_example()
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "SLACK_APP_TOKEN", "ANTHROPIC_API_KEY"):
        assert "replace" in listed[name].lower(), f"{name} must be a placeholder"


def _locked() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        found = PIN.match(line.strip())
        if found:
            pins[canonicalize_name(found.group(1))] = Version(found.group(3))
    return pins


def test_the_lock_pins_every_runtime_dependency_within_its_range() -> None:
    pins = _locked()
    for requirement in _runtime_requirements():
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not pinned in requirements.lock"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {requirement.name}=={pins[name]}, outside "
            f"{requirement.specifier} (pyproject.toml); regenerate it"
        )
        for extra in sorted(requirement.extras):
            for needed in _brought_by(requirement.name, extra):
                assert needed in pins, f"{requirement.name}[{extra}] needs {needed}: not pinned"


def _brought_by(package: str, extra: str) -> set[str]:
    """What installing `package[extra]` adds (from the installed package's metadata)."""
    brought: set[str] = set()
    for line in metadata.requires(package) or []:
        needed = Requirement(line)
        if needed.marker is None:
            continue
        if needed.marker.evaluate({"extra": extra}) and not needed.marker.evaluate({"extra": ""}):
            brought.add(canonicalize_name(needed.name))
    return brought


def _lock_text() -> str:
    return (ROOT / "requirements.lock").read_text()


def test_the_lock_pins_every_line_to_one_version() -> None:
    """Nothing in a deploy's install is left to the resolver on the day."""
    for line in _lock_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(("#", "--")):
            assert PIN.match(stripped), f"not a pin: {stripped}"


FIRST_RELEASE_WITH = [
    ("slack-sdk", "3.40.0", "slack_sdk.models.messages.chunk (the streamed reply's chunks)"),
    ("slack-sdk", "3.43.0", "AsyncChatStream.ts (the streamed message's ts, read on start)"),
]
"""What the code uses that a dependency did not always have, and the first release with it (read
from the releases' wheels: 3.39.0 has no chunk module, 3.42.0's AsyncChatStream has no `ts`).
A floor below it installs a version on which the bot fails: at import, or at its first reply."""


def test_dependency_floors_have_what_the_code_uses() -> None:
    floors = {canonicalize_name(r.name): r.specifier for r in _runtime_requirements()}
    for package, first, what in FIRST_RELEASE_WITH:
        specifier: SpecifierSet = floors[canonicalize_name(package)]
        lowest = [s.version for s in specifier if s.operator in (">=", "==", "~=")]
        assert lowest, f"{package} has no lower bound"
        assert Version(lowest[0]) >= Version(first), (
            f"{package}{specifier} allows releases without {what}; the floor must be >={first}"
        )
