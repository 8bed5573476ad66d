"""Every Slack Web API method the bot calls, with the OAuth scopes each one needs, in one place.

`manifest.yml` asks a workspace for exactly what follows from here: the scopes of the methods,
plus those its event subscriptions and features need (`bot_scopes`). A test keeps all three
honest (`tests/unit/test_slack_scopes.py`): it scans `bot/` for every Web API call, checks each is
listed here and exists in the installed slack-sdk, and compares the manifest's scopes with
`bot_scopes`. So a new call without its scope fails in CI instead of with `missing_scope` in a
workspace, and a scope nothing uses is not asked for (an admin approves each one).

The scopes are those Slack's method reference gives for a bot token. Where a method reads from
conversations of several types, the bot needs the scope of each type it works in: public and
private channels and DMs (the `message.*` events `manifest.yml` subscribes to).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

_HISTORY = ("channels:history", "groups:history", "im:history")
"""Reading a conversation's messages, in each kind of conversation the bot works in."""

BOT_METHODS: Mapping[str, tuple[str, ...]] = {
    # Bolt's single-workspace authorization, `bot clock` (which workspace this token is for)
    # and the renderer (which messages in a thread are the bot's own).
    "auth.test": (),
    # Replies: posted and edited, or streamed (slack-sdk's `chat_stream` helper sends these
    # three), and the leftovers of a crash deleted.
    "chat.postMessage": ("chat:write",),
    "chat.update": ("chat:write",),
    "chat.delete": ("chat:write",),
    "chat.startStream": ("chat:write",),
    "chat.appendStream": ("chat:write",),
    "chat.stopStream": ("chat:write",),
    # Refused clicks and reset answers without a response_url: only the person sees them.
    "chat.postEphemeral": ("chat:write",),
    # The thread's progress status. Slack's reference gives `chat:write` for a bot token; since
    # its March 2026 change it also still takes `assistant:write`, on the way out, so the app
    # asks for `chat:write` alone and gets the status in channel threads and DMs alike.
    "assistant.threads.setStatus": ("chat:write",),
    # The agent session of a thread: processing / suspended / active, and its title, which
    # gives Slack's Stop button. "Authentication token bearing the chat:write scope"
    # (https://docs.slack.dev/reference/methods/agents.sessions.setStatus).
    "agents.sessions.setStatus": ("chat:write",),
    # The agent's suggested prompts in a new assistant thread and in the app's Messages tab.
    "assistant.threads.setSuggestedPrompts": ("assistant:write",),
    # The App Home tab (the approval inbox) and the Deny modal: no scope, the view is the
    # app's own (https://docs.slack.dev/reference/methods/views.publish, views.open).
    "views.publish": (),
    "views.open": (),
    # The inbox's link to each request's thread (https://docs.slack.dev/reference/methods/
    # chat.getPermalink: no scope).
    "chat.getPermalink": (),
    # After a crash: is a post whose answer was lost in the thread (or, for a top-level
    # proactive post, the channel) already? Found by the key in its metadata, or for a stream
    # (which cannot carry metadata until it stops) as the bot's one unclaimed message there.
    "conversations.replies": _HISTORY,
    "conversations.history": _HISTORY,
}

APP_TOKEN_METHODS: Mapping[str, tuple[str, ...]] = {
    # `bot socket`: slack-sdk's Socket Mode client opens the websocket with the app-level token
    # (`SLACK_APP_TOKEN`), whose scope is granted on the app's Basic Information page, not
    # through `oauth_config` in the manifest.
    "apps.connections.open": ("connections:write",),
}

EVENT_SCOPES: Mapping[str, tuple[str, ...]] = {
    "app_mention": ("app_mentions:read",),
    "message.channels": ("channels:history",),
    "message.groups": ("groups:history",),
    "message.im": ("im:history",),
    # The App Home: its Home tab (the approval inbox) and its Messages tab (the agent's DM).
    "app_home_opened": (),
    # Slack's Stop button on an agent session (thread-based sessions are `chat:write`'s).
    "agent_session_stopped": ("chat:write",),
    # Only an app on the older assistant surface (`assistant_view`) gets it; the bot handles it.
    "assistant_thread_started": ("assistant:write",),
    # A workspace removed the app or revoked its tokens: no scope (docs.slack.dev/reference/
    # events/app_uninstalled, tokens_revoked); a multi-workspace install deletes its tokens.
    "app_uninstalled": (),
    "tokens_revoked": (),
}
"""What each event subscription (`settings.event_subscriptions.bot_events`) needs."""

FEATURE_SCOPES: Mapping[str, tuple[str, ...]] = {
    "slash_commands": ("commands",),
    "shortcuts": ("commands",),
    # "Declaring an app as an agent adds the assistant:write scope to it"
    # (https://docs.slack.dev/ai/agent-sessions).
    "agent_view": ("assistant:write",),
}
"""What each manifest feature (`features.<name>`) needs: commands and shortcuts both need
`commands`; an agent, `assistant:write`."""


def bot_scopes(*, events: Iterable[str], features: Iterable[str]) -> set[str]:
    """The bot token's scopes for an app with these event subscriptions and features: what the
    manifest's `oauth_config.scopes.bot` must be."""
    scopes = {scope for needed in BOT_METHODS.values() for scope in needed}
    scopes.update(scope for event in events for scope in EVENT_SCOPES[event])
    scopes.update(scope for name in features for scope in FEATURE_SCOPES.get(name, ()))
    return scopes


MANIFEST_EVENTS = (
    "app_mention",
    "message.channels",
    "message.groups",
    "message.im",
    "app_home_opened",
    "agent_session_stopped",
    "app_uninstalled",
    "tokens_revoked",
)
MANIFEST_FEATURES = ("slash_commands", "shortcuts", "agent_view")
"""What `manifest.yml` subscribes to and declares (a test holds them equal)."""


def install_scopes() -> list[str]:
    """The scopes the install flow asks a workspace for by default (`SLACK_SCOPES` unset):
    the manifest's bot scopes, so an install grants what the code calls and nothing more."""
    return sorted(bot_scopes(events=MANIFEST_EVENTS, features=MANIFEST_FEATURES))
