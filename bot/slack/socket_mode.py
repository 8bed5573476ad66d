"""Socket Mode (`bot socket`): Slack pushes envelopes over a websocket the bot opens, and each one
is handled as `/slack/events` handles Slack's request (`SlackBot.slack_events`), with the same
rules (https://docs.slack.dev/apis/events-api/using-socket-mode/):

- An envelope is acknowledged only when Bolt's dispatch has returned, and the listeners run
  before it returns (`process_before_response`): the ack means what the HTTP 200 means, the turn
  is queued durably (an answer applied, a stop committed). A process that dies before its ack
  leaves the envelope unacknowledged, and Slack delivers an event again on the next connection;
  that delivery is the same turn (its id comes from the message). A dispatch that fails (the
  database) is not acknowledged either, as a 5xx is Slack's cue to retry.
- A payload of a shape Slack never sends (`bot.slack.payload_shape`), or one no listener takes, is
  acknowledged and does nothing, as over HTTP, so that Slack does not send it again and again;
  so is an envelope whose payload is not a JSON object at all (`null`), which slack_sdk's own
  parsing refuses with an exception before any listener sees it (`_Client`).
- While the database is away a dispatch answers 503: the envelope is left unacknowledged, and
  the outage is logged once by the runtime's `OutageLog`, not once per envelope.
- The app-level token is tried once at start (`apps.connections.open`): a refused one is a
  `SocketModeError` naming `SLACK_APP_TOKEN`, never a retry loop. From then on slack_sdk's
  aiohttp client keeps the connection: it opens a new URL when Slack sends `disconnect`, when the
  connection closes, and when pings go unanswered.

No signature is checked: the connection itself was opened with the app's secret token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import aiohttp
from slack_bolt.async_app import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.async_client import AsyncBaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.slack.payload_shape import problem as payload_problem

if TYPE_CHECKING:
    from bot.app import SlackBot

log = logging.getLogger(__name__)

PING_SECONDS = 10.0
"""How often the client pings Slack (Bolt's default); four missed pongs count as a dead
connection, and a connection that closed without a close frame is noticed within one."""

TOKEN_HELP = (
    "use the app-level token (xapp-…) from the app's Basic Information → App-Level Tokens, "
    "with the connections:write scope"
)
REFUSALS = {
    "not_allowed_token_type": "SLACK_APP_TOKEN is not an app-level token; " + TOKEN_HELP,
    "missing_scope": "SLACK_APP_TOKEN lacks the connections:write scope; " + TOKEN_HELP,
}


LINK_DISABLED = "link_disabled"
DISABLED = (
    "Slack turned Socket Mode off for this app (link_disabled): turn it on again in the app's "
    "settings (Socket Mode), or serve over HTTP with `bot serve`"
)


class SocketModeError(Exception):
    """Socket Mode cannot start; the message is one line for the person running `bot socket`,
    and names no secret."""


class SocketModeConnection:
    """The bot's websocket to Slack, and how its envelopes reach Bolt and are acknowledged."""

    def __init__(self, bot: SlackBot, app_token: str, *, ping_interval: float = PING_SECONDS):
        self.bot = bot
        self.ping_interval = ping_interval
        self._token = app_token
        self._url: str | None = None
        self.client: SocketModeClient | None = None
        """slack_sdk's client, made by `connect` (it starts work on the loop when made)."""
        self.ended = asyncio.Event()
        """Set when Slack turned Socket Mode off for the app (`disconnect`, `link_disabled`):
        slack_sdk would try to reconnect forever, logging a failure each time."""

    async def check_token(self) -> None:
        """Ask Slack for the first connection's URL: `SocketModeError` if it refuses the token.
        (Done before the bot starts, so that a wrong token ends the command at once.)"""
        self._url = await self._first_url()

    async def connect(self) -> None:
        """Open the first connection (reconnecting is the client's own work from then on)."""
        if self._url is None:
            await self.check_token()
        self.client = _Client(
            app_token=self._token,
            web_client=self.bot.client,
            ping_interval=self.ping_interval,
            logger=logging.getLogger("slack_sdk.socket_mode"),
        )
        self.client.socket_mode_request_listeners.append(self.handle)
        self.client.on_message_listeners.append(self._watch)
        self.client.wss_uri = self._url
        await self.client.connect()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()

    async def _watch(self, message: aiohttp.WSMessage) -> None:
        if LINK_DISABLED in str(message.data):  # cheap test first: every envelope passes here
            with contextlib.suppress(ValueError):
                body = json.loads(message.data)
                if body.get("type") == "disconnect" and body.get("reason") == LINK_DISABLED:
                    self.ended.set()

    async def _first_url(self) -> str:
        try:
            response = await self.bot.client.apps_connections_open(app_token=self._token)
        except SlackApiError as err:
            code = str(err.response.get("error") or "unknown_error")
            reason = REFUSALS.get(code, f"Slack refused SLACK_APP_TOKEN; {TOKEN_HELP}")
            raise SocketModeError(f"{reason} ({code})") from None
        except (aiohttp.ClientError, TimeoutError) as err:
            raise SocketModeError(
                f"could not reach Slack to open a Socket Mode connection ({type(err).__name__})"
            ) from None
        return str(response["url"])

    async def handle(
        self, socket_client: AsyncBaseSocketModeClient, request: SocketModeRequest
    ) -> None:
        """One envelope: dispatched, then acknowledged, unless the dispatch failed."""
        payload = request.payload
        reason = payload_problem(payload)
        bolt_request = None if reason else _bolt_request(request)
        if bolt_request is None:
            log.info("ignored an envelope Slack does not send (%s); acknowledged", reason)
            await _acknowledge(socket_client, request)
            return
        response = await self.bot.bolt.async_dispatch(bolt_request)
        if response.status == 404:
            log.info("no listener for an envelope; acknowledged so Slack does not redeliver it")
            await _acknowledge(socket_client, request)
        elif response.status < 300:
            await _acknowledge(socket_client, request, _response_payload(request, response))
        elif response.status == 503:
            log.debug("an envelope waits for the database; not acknowledged")
        else:
            log.warning(
                "an envelope failed (status %s); not acknowledged, so Slack delivers it again",
                response.status,
                extra={"envelope_type": request.type},
            )


class _Client(SocketModeClient):
    """slack_sdk's client, but an envelope whose payload is not an object is acknowledged and
    ignored: slack_sdk builds its `SocketModeRequest` before any listener runs, and that raises
    on such a payload (logged as a failure, never acknowledged, so delivered again)."""

    async def run_message_listeners(self, message: dict[str, Any], raw_message: str) -> None:
        envelope = message.get("envelope_id")
        if envelope is not None and not isinstance(message.get("payload"), dict):
            log.info(
                "ignored an envelope whose payload is not an object; acknowledged",
                extra={"envelope_type": message.get("type")},
            )
            with contextlib.suppress(ConnectionError, aiohttp.ClientError):
                await self.send_socket_mode_response(SocketModeResponse(envelope_id=envelope))
            return
        await super().run_message_listeners(message, raw_message)


async def run_socket_mode(
    bot: SlackBot,
    connection: SocketModeConnection,
    stop: asyncio.Event,
    *,
    connected: Callable[[], None] = lambda: None,
) -> None:
    """`bot socket` from the token check to `stop`: the bot starts only once Slack took the
    token, and ends (`SocketModeError`) if Slack turns Socket Mode off. Closes both.

    `stop` is heeded while connecting too: slack_sdk retries a failing first connection for
    as long as it fails."""
    stopping = asyncio.create_task(stop.wait())
    try:
        await connection.check_token()
        await bot.start()
        if not await _before(connection.connect(), stopping):
            return
        log.info("connected in socket mode", extra={"agent": bot.agent.name})
        connected()
        if await _before(connection.ended.wait(), stopping):
            raise SocketModeError(DISABLED)
    finally:
        stopping.cancel()
        await connection.close()
        await bot.close()


async def _before(work: Coroutine[Any, Any, Any], stopping: asyncio.Task[Any]) -> bool:
    """Run `work` until it ends (True) or `stopping` does first (False: `work` is cancelled)."""
    task = asyncio.ensure_future(work)
    await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        task.result()
        return True
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return False


def _bolt_request(request: SocketModeRequest) -> AsyncBoltRequest | None:
    """The request as Bolt's Socket Mode adapter builds it (retries named as over HTTP), or None
    where building it fails on a payload of the wrong shape (`request_checks.bolt_request_of`)."""
    headers: dict[str, str] = {}
    if request.retry_attempt:
        headers["x-slack-retry-num"] = str(request.retry_attempt)
        headers["x-slack-retry-reason"] = str(request.retry_reason or "")
    try:
        return AsyncBoltRequest(
            mode="socket_mode",
            body=request.payload,
            headers=headers or None,  # type: ignore[arg-type]
        )
    except Exception:
        return None


def _response_payload(request: SocketModeRequest, response: BoltResponse) -> dict[str, Any] | None:
    """What an `ack(...)` said, for the envelopes that take an answer in their ack (a slash
    command's message, a view submission's `response_action`); Slack ignores it elsewhere."""
    if not request.accepts_response_payload or not response.body:
        return None
    content_type = response.headers.get("content-type", [""])[0]
    if content_type.startswith("application/json"):
        body = json.loads(response.body)
        return body if isinstance(body, dict) else None
    return {"text": response.body}


async def _acknowledge(
    socket_client: AsyncBaseSocketModeClient,
    request: SocketModeRequest,
    payload: dict[str, Any] | None = None,
) -> None:
    try:
        await socket_client.send_socket_mode_response(
            SocketModeResponse(envelope_id=request.envelope_id, payload=payload)
        )
    except (ConnectionError, aiohttp.ClientError) as err:
        # The connection ended between the dispatch and the ack: what the envelope asked for is
        # done (committed), and Slack delivers an event again on the next connection, where it
        # is the same turn.
        log.warning(
            "could not acknowledge an envelope (%s); Slack will deliver it again",
            type(err).__name__,
            extra={"envelope_type": request.type},
        )
