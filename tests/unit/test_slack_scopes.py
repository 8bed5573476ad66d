"""The scopes the Slack app asks for follow from the code: every Web API method the bot calls is
listed in `bot.slack.scopes` with the scopes Slack's method docs name, and `manifest.yml` asks
for exactly those plus what its events and features need. A method added without its scope
fails here, not with `missing_scope` in someone's workspace; a scope nothing uses fails too
(a workspace admin approves every scope an app asks for)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
import yaml
from slack_sdk.web.async_chat_stream import AsyncChatStream
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.scopes import (
    APP_TOKEN_METHODS,
    BOT_METHODS,
    EVENT_SCOPES,
    FEATURE_SCOPES,
    MANIFEST_EVENTS,
    MANIFEST_FEATURES,
    bot_scopes,
    install_scopes,
)

ROOT = Path(__file__).resolve().parents[2]
BOT = ROOT / "bot"
CLIENT_CALL = re.compile(r"\bclient\.([a-z]+_[A-Za-z0-9_]+)\b(?=\s*[(,)])")
"""A client method called, or handed on uncalled (`functools.partial(client.x, ...)`)."""
API_CALL = re.compile(r"\bapi_call\(\s*[\"']([A-Za-z.]+)[\"']")
CHAT_STREAM = "chat_stream"
"""slack-sdk's streaming helper: one client method, three Web API methods behind it."""


def _web_api_method(python_name: str) -> str:
    """The Web API method an `AsyncWebClient` method calls, read from its source."""
    function = getattr(AsyncWebClient, python_name, None)
    assert function is not None, f"`client.{python_name}(` is not an AsyncWebClient method"
    found = API_CALL.search(inspect.getsource(function))
    assert found, f"AsyncWebClient.{python_name} calls no Web API method"
    return found.group(1)


def _stream_methods() -> set[str]:
    """What `chat_stream` sends, read from the helper it returns (which holds the client as
    `self._client`)."""
    source = inspect.getsource(AsyncChatStream)
    names = set(re.findall(r"\bself\._client\.([A-Za-z_][A-Za-z0-9_]*)\(", source))
    assert names, "AsyncChatStream no longer calls the client as `self._client`"
    return {_web_api_method(name) for name in names}


def _sources() -> list[Path]:
    return [p for p in sorted(BOT.rglob("*.py")) if "testing" not in p.relative_to(BOT).parts]


def called_methods() -> dict[str, set[str]]:
    """Every Web API method `bot/` calls (its test stand-ins aside), with where."""
    found: dict[str, set[str]] = {}
    for path in _sources():
        text = path.read_text()
        where = str(path.relative_to(ROOT))
        for name in CLIENT_CALL.findall(text):
            methods = _stream_methods() if name == CHAT_STREAM else {_web_api_method(name)}
            for method in methods:
                found.setdefault(method, set()).add(where)
        for method in API_CALL.findall(text):
            found.setdefault(method, set()).add(where)
    return found


def _manifest(name: str = "manifest.yml") -> dict[str, object]:
    loaded = yaml.safe_load((ROOT / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


def test_the_scan_sees_the_calls_it_must() -> None:
    """The scanner itself: the renderer's calls, the streaming helper and the clock's."""
    called = called_methods()
    for method in (
        "chat.postMessage",
        "chat.update",
        "chat.startStream",
        "chat.appendStream",
        "chat.stopStream",
        "conversations.replies",
        "assistant.threads.setStatus",
        "auth.test",
    ):
        assert method in called, method


LISTED = {**BOT_METHODS, **APP_TOKEN_METHODS}
"""The bot token's methods and the app-level token's (`bot socket` opens its connection)."""


def test_every_method_the_bot_calls_is_listed_with_its_scopes() -> None:
    missing = {m: sorted(w) for m, w in called_methods().items() if m not in LISTED}
    assert not missing, f"add these Web API methods to bot/slack/scopes.py: {missing}"


def test_nothing_is_listed_that_the_bot_does_not_call() -> None:
    """A method left in the list after its call went would keep its scope in the manifest."""
    stale = set(LISTED) - set(called_methods())
    assert not stale, f"no longer called by bot/: {sorted(stale)}"


@pytest.mark.parametrize("method", sorted({**BOT_METHODS, **APP_TOKEN_METHODS}))
def test_each_listed_method_exists_in_the_installed_client(method: str) -> None:
    assert _web_api_method(method.replace(".", "_")) == method


def test_the_manifest_asks_for_exactly_the_scopes_the_code_needs() -> None:
    manifest = _manifest()
    features = manifest["features"]
    settings = manifest["settings"]
    assert isinstance(features, dict)
    assert isinstance(settings, dict)
    events = settings["event_subscriptions"]["bot_events"]
    unknown = [e for e in events if e not in EVENT_SCOPES]
    assert not unknown, f"add the scopes these events need to EVENT_SCOPES: {unknown}"
    declared = manifest["oauth_config"]["scopes"]["bot"]  # type: ignore[index]
    assert len(declared) == len(set(declared)), "a scope is listed twice"
    assert set(declared) == bot_scopes(events=events, features=features)


def test_feature_scopes_name_real_manifest_features() -> None:
    assert set(FEATURE_SCOPES) <= {
        "slash_commands",
        "shortcuts",
        "bot_user",
        "app_home",
        "agent_view",
    }
    assert all(scopes for scopes in FEATURE_SCOPES.values())


def test_the_install_flow_asks_for_the_manifests_scopes_by_default() -> None:
    """`SLACK_SCOPES` unset: a workspace installing through `/slack/install` grants what the
    manifest asks for, no more and no less (`bot.slack.scopes.install_scopes`)."""
    manifest = _manifest()
    settings = manifest["settings"]
    features = manifest["features"]
    assert isinstance(settings, dict)
    assert isinstance(features, dict)
    assert tuple(settings["event_subscriptions"]["bot_events"]) == MANIFEST_EVENTS
    assert set(MANIFEST_FEATURES) <= set(features)
    declared = manifest["oauth_config"]["scopes"]["bot"]  # type: ignore[index]
    assert install_scopes() == sorted(declared)
