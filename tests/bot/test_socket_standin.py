"""The Socket Mode stand-in refuses what Slack refuses, so a bot proven against it is proven:
only the app-level token opens a connection, a URL opens one connection, an acknowledgement
must name an envelope sent and may carry a payload only where the envelope takes one, and an
unacknowledged event comes again, one `retry_attempt` higher."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.testing import SlackStandIn
from bot.testing.socket_mode import APP_TOKEN
from tests.bot.harness import TOKEN


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def web(standin: SlackStandIn, token: str) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=standin.api_url)


async def opened_url(standin: SlackStandIn) -> str:
    response = await web(standin, TOKEN).apps_connections_open(app_token=APP_TOKEN)
    return str(response["url"])


async def error_of(call: Any) -> str:
    with pytest.raises(SlackApiError) as err:
        await call
    return str(err.value.response["error"])


async def test_only_the_app_level_token_opens_a_connection(standin, socket):
    client = web(standin, TOKEN)
    url = await opened_url(standin)
    assert url.startswith(f"ws://127.0.0.1:{socket.port}/link/?ticket=")
    assert await error_of(client.apps_connections_open(app_token="xapp-1-A0-1-wrong")) == (
        "invalid_auth"
    )
    assert await error_of(client.apps_connections_open(app_token=TOKEN)) == (
        "not_allowed_token_type"
    )
    # and the app-level token is good for nothing else
    app_level = web(standin, APP_TOKEN)
    assert await error_of(app_level.chat_postMessage(channel="C1", text="hi")) == (
        "not_allowed_token_type"
    )


async def test_an_app_without_socket_mode_opens_none(standin):
    client = web(standin, TOKEN)
    assert await error_of(client.apps_connections_open(app_token=APP_TOKEN)) == "invalid_auth"


async def test_a_url_opens_one_connection_that_starts_with_hello(standin, socket, http):
    url = await opened_url(standin)
    async with http.ws_connect(url) as ws:
        hello = await ws.receive_json()
        assert hello["type"] == "hello"
        assert hello["num_connections"] == 1
        assert hello["connection_info"] == {"app_id": "A0DEMO"}
        with pytest.raises(aiohttp.WSServerHandshakeError) as err:
            await http.ws_connect(url)
        assert err.value.status == 401
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await http.ws_connect(f"ws://127.0.0.1:{socket.port}/link/?ticket=made-up")
    assert socket.opened == 1


async def test_acknowledgements_are_held_to_slacks_rules(standin, socket, http):
    async with http.ws_connect(await opened_url(standin)) as ws:
        await ws.receive_json()  # hello
        event = await socket.events_api({"type": "event_callback", "event": {"type": "x"}})
        command = await socket.slash_command({"command": "/agent-reset", "text": ""})
        sent = [await ws.receive_json(), await ws.receive_json()]
        assert [m["type"] for m in sent] == ["events_api", "slash_commands"]
        assert sent[0]["retry_attempt"] == 0
        assert sent[0]["retry_reason"] == ""
        assert sent[0]["accepts_response_payload"] is False
        assert sent[1]["accepts_response_payload"] is True
        assert "retry_attempt" not in sent[1]

        await ws.send_str(json.dumps({"envelope_id": "not-sent"}))
        await ws.send_str(json.dumps({"envelope_id": event.envelope_id, "payload": {"a": 1}}))
        await ws.send_str(
            json.dumps({"envelope_id": command.envelope_id, "payload": {"text": "k"}})
        )
        ack = await command.wait_acked()
        await event.wait_acked()
    assert ack.payload == {"text": "k"}
    assert socket.problems == [
        "an acknowledgement naming no envelope sent",
        "a payload in the ack of an events_api envelope",
    ]


async def test_an_unacknowledged_event_comes_again_on_the_next_connection(standin, socket, http):
    async with http.ws_connect(await opened_url(standin)) as ws:
        await ws.receive_json()
        event = await socket.events_api({"type": "event_callback", "event": {"type": "x"}})
        click = await socket.interactive({"type": "block_actions", "actions": []})
        await ws.receive_json()
        await ws.receive_json()
    await socket.wait_for(lambda: socket.live == 0)
    async with http.ws_connect(await opened_url(standin)) as ws:
        await ws.receive_json()  # hello
        again = await ws.receive_json()
        assert again["envelope_id"] == event.envelope_id
        assert again["retry_attempt"] == 1
        assert again["retry_reason"] == "timeout"
        await ws.send_str(json.dumps({"envelope_id": event.envelope_id}))
        ack = await event.wait_acked()
    assert ack.attempt == 1
    assert event.connections == [1, 2]
    assert not click.acked
    assert click.attempts == 1  # a click is not delivered again
    with pytest.raises(ValueError, match="does not redeliver"):
        await socket.redeliver(click)
