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
