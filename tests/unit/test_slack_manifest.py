"""`manifest.yml` declares what the handlers serve, and `manifest.dev.yml` is the same app for
Socket Mode: a copy kept by hand would drift (a scope or shortcut added to one only), and the
developer's app would then behave unlike the deployed one."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from bot.core.settings import Settings
from bot.slack.listeners import HANDLED_EVENTS
from bot.slack.resets import RESET_SHORTCUT

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


def test_the_app_is_an_agent_with_its_home_and_messages_tabs() -> None:
    """Slack's current agent surface is `features.agent_view` (slackapi/manifest-schema: an
    `agent_description` of at most 300 characters, at most 4 suggested prompts); the Home tab
    is the approval inbox, the Messages tab the agent's DM."""
    features = _load("manifest.yml")["features"]
    assert "assistant_view" not in features  # the older surface agent_view replaces
    agent = features["agent_view"]
    assert set(agent) <= {"agent_description", "suggested_prompts", "actions"}
    assert 0 < len(agent["agent_description"]) <= 300
    assert len(agent.get("suggested_prompts", [])) <= 4
    assert features["app_home"] == {
        "home_tab_enabled": True,
        "messages_tab_enabled": True,
        "messages_tab_read_only_enabled": False,
    }


def test_every_subscribed_event_has_a_listener() -> None:
    """An event the app subscribes to but never handles would only cost acks; one it handles
    but does not subscribe to never arrives (Stop and the Home tab need theirs)."""
    events = _load("manifest.yml")["settings"]["event_subscriptions"]["bot_events"]
    assert {"app_home_opened", "agent_session_stopped"} <= set(events)
    # Under agent_view Slack starts a conversation with app_home_opened (tab: messages);
    # assistant_thread_started belongs to assistant_view: handled, not subscribed.
    assert "assistant_thread_started" not in events
    assert {e.split(".")[0] for e in events} <= set(HANDLED_EVENTS)
