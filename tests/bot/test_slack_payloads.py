"""The driver sends what Slack sends: a test that passes against a payload Slack never builds
proves nothing about the bot in a real workspace.

The field lists are Slack's own: the slash command request
(api.slack.com/interactivity/slash-commands, "app_command_handling") and the message shortcut
payload (api.slack.com/reference/interaction-payloads/shortcuts), with the fields real requests
carry beyond the documented examples (`is_enterprise_install`, `enterprise`, `message_ts`,
`action_ts`), as Bolt's own types and tests describe them.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest

from bot.testing import SlackDriver, SlackStandIn

SLASH_COMMAND_FIELDS = {
    "token",
    "team_id",
    "team_domain",
    "channel_id",
    "channel_name",
    "user_id",
    "user_name",
    "command",
    "text",
    "api_app_id",
    "is_enterprise_install",
    "response_url",
    "trigger_id",
}
GRID_FIELDS = {"enterprise_id", "enterprise_name"}
MESSAGE_SHORTCUT_FIELDS = {
    "type",
    "token",
    "action_ts",
    "team",
    "user",
    "channel",
    "is_enterprise_install",
    "enterprise",
    "callback_id",
    "trigger_id",
    "message_ts",
    "message",
    "response_url",
}


class Captured:
    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200)

    def form(self) -> dict[str, str]:
        assert self.requests[-1].headers["content-type"] == "application/x-www-form-urlencoded"
        return dict(parse_qsl(self.requests[-1].content.decode(), keep_blank_values=True))

    def payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = json.loads(self.form()["payload"])
        return payload


@pytest.fixture
async def captured() -> Captured:
    return Captured()


async def _driver(
    captured: Captured, standin: SlackStandIn | None = None, **kwargs: Any
) -> SlackDriver:
    driver = SlackDriver("http://bot.invalid", "secret", standin=standin, **kwargs)
    await driver.http.aclose()
    driver.http = httpx.AsyncClient(transport=httpx.MockTransport(captured.handler))
    return driver


@pytest.fixture
async def driver(captured: Captured) -> AsyncIterator[SlackDriver]:
    slack = await _driver(captured)
    try:
        yield slack
    finally:
        await slack.aclose()


async def test_a_slash_command_carries_slacks_fields_and_no_thread(
    driver: SlackDriver, captured: Captured
) -> None:
    """Slack runs an app's slash command only outside threads, so its request has no
    `thread_ts`; a driver able to send one would let a test prove a thread-aware reset that no
    workspace can trigger."""
    await driver.command("U0ALICE", "/agent-reset", "1700000000.000100", channel="C0CTRL")
    form = captured.form()
    assert set(form) == SLASH_COMMAND_FIELDS
    assert form["is_enterprise_install"] == "false"
    assert form["text"] == "1700000000.000100"
    assert (form["team_id"], form["channel_id"], form["user_id"]) == ("T0DEMO", "C0CTRL", "U0ALICE")


async def test_a_slash_command_from_an_enterprise_grid_workspace_names_the_org(
    captured: Captured,
) -> None:
    slack = await _driver(captured, enterprise_id="E0GRID")
    try:
        await slack.command("U0ALICE", "/agent-reset", channel="C0CTRL")
    finally:
        await slack.aclose()
    form = captured.form()
    assert set(form) == SLASH_COMMAND_FIELDS | GRID_FIELDS
    assert form["enterprise_id"] == "E0GRID"


def test_the_slash_command_builder_cannot_be_given_a_thread() -> None:
    for builder in (SlackDriver.command, SlackDriver.command_form):
        parameters = inspect.signature(builder).parameters
        assert "thread_ts" not in parameters
        assert all(p.kind is not inspect.Parameter.VAR_KEYWORD for p in parameters.values())


async def test_a_message_shortcut_on_a_reply_names_the_message_and_its_thread(
    driver: SlackDriver, captured: Captured
) -> None:
    response = await driver.message_shortcut(
        "U0ALICE",
        "reset_conversation",
        channel="C0CTRL",
        message_ts="1700000000.000200",
        thread_ts="1700000000.000100",
        response_url="https://hooks.slack.invalid/app/1",
    )
    assert response.status_code == 200
    payload = captured.payload()
    assert set(payload) == MESSAGE_SHORTCUT_FIELDS
    assert payload["type"] == "message_action"
    assert payload["callback_id"] == "reset_conversation"
    assert payload["message_ts"] == payload["message"]["ts"] == "1700000000.000200"
    assert payload["message"]["thread_ts"] == "1700000000.000100"
    assert payload["message"]["type"] == "message"
    assert payload["team"] == {"id": "T0DEMO", "domain": "demo"}
    assert payload["user"]["id"] == "U0ALICE"
    assert payload["user"]["team_id"] == "T0DEMO"
    assert payload["channel"]["id"] == "C0CTRL"
    assert payload["response_url"] == "https://hooks.slack.invalid/app/1"
    assert payload["is_enterprise_install"] is False
    assert payload["enterprise"] is None


async def test_a_message_shortcut_takes_the_message_from_the_stand_in(captured: Captured) -> None:
    """As Slack does, the payload holds the whole message, and a thread's root says it is one
    (`thread_ts` equal to its own `ts`, with its replies counted)."""
    standin = SlackStandIn()
    root, reply, alone_ts = "1700000000.000100", "1700000000.000200", "1700000000.000300"
    standin.add_user_message("C0CTRL", root, "U0BOB", "the root")
    standin.add_user_message("C0CTRL", reply, "U0CAROL", "a reply", root)
    standin.add_user_message("C0CTRL", alone_ts, "U0DAN", "alone")
    slack = await _driver(captured, standin)
    try:
        await slack.message_shortcut(
            "U0ALICE", "reset_conversation", channel="C0CTRL", message_ts=root
        )
        first = captured.payload()["message"]
        await slack.message_shortcut(
            "U0ALICE", "reset_conversation", channel="C0CTRL", message_ts=alone_ts
        )
        alone = captured.payload()["message"]
    finally:
        await slack.aclose()
    assert first["text"] == "the root"
    assert first["user"] == "U0BOB"
    assert first["thread_ts"] == root
    assert first["reply_count"] == 1
    assert alone["text"] == "alone"
    assert "thread_ts" not in alone
    assert "reply_count" not in alone


async def test_a_message_shortcut_from_a_person_of_another_workspace(
    driver: SlackDriver, captured: Captured
) -> None:
    await driver.message_shortcut(
        "U0EVE",
        "reset_conversation",
        channel="C0CTRL",
        message_ts="1700000000.000200",
        user_team_id="T0OTHER",
    )
    payload = captured.payload()
    assert payload["team"]["id"] == "T0DEMO"
    assert payload["user"]["team_id"] == "T0OTHER"


# what Slack sends an agent app (bot/testing/agent_events.py cites each reference) ----------

STOP_FIELDS = {"type", "channel", "thread_ts", "user", "streaming_message_ts", "event_ts"}
"""https://docs.slack.dev/reference/events/agent_session_stopped"""
THREAD_STARTED_FIELDS = {"type", "assistant_thread", "event_ts"}
ASSISTANT_THREAD_FIELDS = {"user_id", "context", "channel_id", "thread_ts"}
"""https://docs.slack.dev/reference/events/assistant_thread_started"""
HOME_OPENED_FIELDS = {"type", "user", "channel", "tab", "event_ts"}
"""https://docs.slack.dev/reference/events/app_home_opened (and `view`, once one was published)"""
VIEW_FIELDS = {
    "id",
    "team_id",
    "type",
    "blocks",
    "private_metadata",
    "callback_id",
    "hash",
    "title",
    "close",
    "submit",
    "clear_on_close",
    "notify_on_close",
    "external_id",
    "root_view_id",
    "previous_view_id",
    "app_id",
    "app_installed_team_id",
    "bot_id",
}
INTERACTION_FIELDS = {
    "type",
    "user",
    "api_app_id",
    "token",
    "team",
    "enterprise",
    "is_enterprise_install",
    "trigger_id",
}
HOME_CLICK_FIELDS = INTERACTION_FIELDS | {"container", "view", "actions"}
"""block_actions from a Home tab: a view container and the view; no channel, message or
response_url (https://docs.slack.dev/reference/interaction-payloads/block_actions-payload)."""
MESSAGE_CLICK_FIELDS = INTERACTION_FIELDS | {
    "container",
    "channel",
    "message",
    "response_url",
    "actions",
}
SUBMISSION_FIELDS = INTERACTION_FIELDS | {"view", "response_urls"}
"""https://docs.slack.dev/reference/interaction-payloads/view-interactions-payload"""


def _event(captured: Captured) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(captured.requests[-1].content)
    assert body["type"] == "event_callback"
    event: dict[str, Any] = body["event"]
    return event


async def test_a_stop_names_the_thread_and_the_streams_slack_stopped(captured: Captured) -> None:
    standin = SlackStandIn()
    root = "1700000000.000100"
    standin.add_user_message("C0CTRL", root, "U0ALICE", "hi")
    slack = await _driver(captured, standin)
    try:
        await slack.stop("U0ALICE", channel="C0CTRL", thread_ts=root, team_id="T0OTHER")
    finally:
        await slack.aclose()
    body = json.loads(captured.requests[-1].content)
    assert body["team_id"] == "T0OTHER"
    event = _event(captured)
    assert set(event) == STOP_FIELDS
    assert (event["channel"], event["thread_ts"], event["user"]) == ("C0CTRL", root, "U0ALICE")
    assert event["streaming_message_ts"] == []  # no stream was active: still an array


async def test_an_assistant_thread_start_carries_its_context(captured: Captured) -> None:
    slack = await _driver(captured, SlackStandIn())
    try:
        channel, thread_ts = await slack.start_assistant_thread("U0ALICE", viewing="C0CTRL")
    finally:
        await slack.aclose()
    event = _event(captured)
    assert set(event) == THREAD_STARTED_FIELDS
    thread = event["assistant_thread"]
    assert set(thread) == ASSISTANT_THREAD_FIELDS
    assert (thread["channel_id"], thread["thread_ts"]) == (channel, thread_ts)
    assert thread["context"]["channel_id"] == "C0CTRL"
    assert thread["context"]["team_id"] == "T0DEMO"


async def test_app_home_opened_has_the_view_only_once_one_was_published(
    captured: Captured,
) -> None:
    standin = SlackStandIn()
    slack = await _driver(captured, standin)
    try:
        await slack.open_home("U0ALICE")
        first = _event(captured)
        standin._publish(
            {"user_id": "U0ALICE", "view": {"type": "home", "blocks": [], "private_metadata": ""}}
        )
        await slack.open_home("U0ALICE")
        second = _event(captured)
        await slack.open_home("U0ALICE", tab="messages")
        messages = _event(captured)
    finally:
        await slack.aclose()
    assert set(first) == HOME_OPENED_FIELDS
    assert set(second) == HOME_OPENED_FIELDS | {"view"}
    assert set(second["view"]) == VIEW_FIELDS
    assert second["view"]["type"] == "home"
    assert set(messages) == HOME_OPENED_FIELDS
    assert messages["tab"] == "messages"


async def test_a_home_click_has_a_view_and_no_channel(captured: Captured) -> None:
    standin = SlackStandIn()
    button = {
        "type": "button",
        "action_id": "agent_approve",
        "value": "v",
        "text": {"type": "plain_text", "text": "Approve"},
    }
    assert standin._publish(
        {
            "user_id": "U0ALICE",
            "view": {"type": "home", "blocks": [{"type": "actions", "elements": [button]}]},
        }
    )["ok"]
    slack = await _driver(captured, standin)
    try:
        await slack.click_in_home("U0ALICE", button)
    finally:
        await slack.aclose()
    payload = captured.payload()
    assert set(payload) == HOME_CLICK_FIELDS
    assert payload["container"] == {"type": "view", "view_id": standin.home_views["U0ALICE"].id}
    assert set(payload["view"]) == VIEW_FIELDS | {"state"}
    assert payload["actions"][0]["action_id"] == "agent_approve"
    assert payload["trigger_id"] in standin.triggers


async def test_a_feedback_click_is_a_feedback_buttons_action(captured: Captured) -> None:
    element = {
        "type": "feedback_buttons",
        "action_id": "agent_feedback",
        "positive_button": {"text": {"type": "plain_text", "text": "👍"}, "value": "up"},
        "negative_button": {"text": {"type": "plain_text", "text": "👎"}, "value": "down"},
    }
    slack = await _driver(captured)
    try:
        await slack.feedback(
            "U0ALICE", element, False, channel="C0CTRL", message_ts="1.2", thread_ts="1.1"
        )
    finally:
        await slack.aclose()
    payload = captured.payload()
    assert set(payload) == MESSAGE_CLICK_FIELDS
    (action,) = payload["actions"]
    assert set(action) == {"type", "action_id", "block_id", "value", "text", "action_ts"}
    assert (action["type"], action["value"]) == ("feedback_buttons", "down")


async def test_a_submission_carries_the_views_state_values(captured: Captured) -> None:
    standin = SlackStandIn()
    standin.issue_trigger("t.1", "U0ALICE")
    opened = standin._open(
        {
            "trigger_id": "t.1",
            "view": {
                "type": "modal",
                "title": {"type": "plain_text", "text": "Deny"},
                "submit": {"type": "plain_text", "text": "Deny"},
                "private_metadata": "bound",
                "callback_id": "agent_deny_reason",
                "blocks": [],
            },
        }
    )
    slack = await _driver(captured, standin)
    try:
        await slack.submit("U0ALICE", opened["view"]["id"], {"reason": {"text": "too much"}})
    finally:
        await slack.aclose()
    payload = captured.payload()
    assert set(payload) == SUBMISSION_FIELDS
    view = payload["view"]
    assert set(view) == VIEW_FIELDS | {"state"}
    assert view["private_metadata"] == "bound"
    assert view["state"]["values"] == {
        "reason": {"text": {"type": "plain_text_input", "value": "too much"}}
    }
