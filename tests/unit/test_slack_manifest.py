"""`manifest.yml` declares what the handlers serve, and `manifest.dev.yml` is the same app for
Socket Mode: a copy kept by hand would drift (a scope or shortcut added to one only), and the
developer's app would then behave unlike the deployed one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from bot.resets import RESET_SHORTCUT
from bot.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((ROOT / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_reset_shortcut_is_declared_as_a_message_shortcut() -> None:
    shortcuts = _load("manifest.yml")["features"]["shortcuts"]
    (reset,) = [s for s in shortcuts if s["callback_id"] == RESET_SHORTCUT]
    assert reset["type"] == "message"
    assert reset["name"] == "Reset this conversation"
    assert 0 < len(reset["name"]) <= 24  # Slack's limit for a shortcut's name
    assert 0 < len(reset["description"]) <= 150


def test_the_slash_command_is_the_one_the_bot_listens_for() -> None:
    commands = _load("manifest.yml")["features"]["slash_commands"]
    assert [c["command"] for c in commands] == [Settings().reset_command]


def _without_urls(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as Socket Mode has it: Slack sends everything over the app's websocket, so
    no request URL anywhere."""
    dev = copy.deepcopy(manifest)
    for command in dev["features"].get("slash_commands", []):
        command.pop("url", None)
    settings = dev["settings"]
    settings["event_subscriptions"].pop("request_url", None)
    settings["interactivity"].pop("request_url", None)
    settings["socket_mode_enabled"] = True
    return dev


def test_the_dev_manifest_is_the_app_in_socket_mode() -> None:
    production, dev = _load("manifest.yml"), _load("manifest.dev.yml")
    assert production["settings"]["socket_mode_enabled"] is False
    assert dev == _without_urls(production)


def test_the_dev_manifest_has_no_request_url() -> None:
    text = (ROOT / "manifest.dev.yml").read_text()
    assert "url:" not in text.replace("usage_hint", "")
    assert "https://" not in text
