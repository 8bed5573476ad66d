"""The `Procfile` deploys what the Deploy section (docs/operations.md) says: migrations on
release, web processes that only verify, queue and ack (`RUN_TURNS=false`), workers that run the
turns, and a clock. A web process that also ran turns beside the workers would take turns off
them and render from two places."""

from __future__ import annotations

import shlex
from pathlib import Path

from bot.core.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _processes() -> dict[str, list[str]]:
    kinds: dict[str, list[str]] = {}
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            kind, _, command = line.partition(":")
            kinds[kind.strip()] = shlex.split(command)
    return kinds


def _environment(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """A command's leading `NAME=value` words (as a shell reads them) and the rest."""
    env: dict[str, str] = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    return env, words


def test_the_procfile_runs_web_without_turns_beside_its_workers(monkeypatch) -> None:
    monkeypatch.delenv("RUN_TURNS", raising=False)
    kinds = _processes()
    assert set(kinds) == {"release", "web", "worker", "clock"}
    commands = {kind: _environment(list(words)) for kind, words in kinds.items()}
    assert commands["release"][1] == ["bot", "db", "upgrade"]
    assert commands["worker"][1] == ["bot", "worker"]
    assert commands["clock"][1] == ["bot", "clock"]
    web_env, web = commands["web"]
    assert web == ["bot", "serve"]
    # What `bot serve` reads from that environment: a web process that runs no turn.
    assert Settings(**{name: value for name, value in web_env.items()}).run_turns is False
    assert Settings().run_turns is True, "the default stays one complete process"


def test_the_deploy_docs_describe_the_procfile_as_it_is() -> None:
    readme = (ROOT / "docs" / "operations.md").read_text()
    for kind, words in _processes().items():
        assert f"`{kind}: {' '.join(words)}`" in readme, kind
