"""A stand-in for Slack's Socket Mode: the websocket Slack pushes an app's events, clicks and
slash commands over, served on 127.0.0.1 beside the Web API stand-in (`SlackStandIn`).

The protocol, as https://docs.slack.dev/apis/events-api/using-socket-mode/ documents it and
the installed `slack_sdk.socket_mode` clients speak it:

- `apps.connections.open`, called with the app-level token (`xapp-…`), answers a `url`; here a
  `ws://127.0.0.1:<port>/link/?ticket=…` good for one connection. Any other token is refused
  (`SlackStandIn` answers `invalid_auth`, or `not_allowed_token_type` for a bot token).
- A connection first gets `hello` (`num_connections`, `debug_info`, `connection_info.app_id`).
- Then envelopes: `{"envelope_id", "type", "payload", "accepts_response_payload"}` with `type`
  `events_api` (the Events API's `event_callback`, plus `retry_attempt` / `retry_reason`),
  `interactive` (a `block_actions` or `view_submission` payload) or `slash_commands` (the
  command's fields). The app acknowledges each by sending `{"envelope_id": …}` back, with a
  `payload` only where the envelope accepts one.
- `disconnect` (`reason`: `warning`, `refresh_requested`, `link_disabled`) asks the app to open
  a new connection; a connection may also just end.

What it refuses or records, so a test can hold the app to it: a URL that was not issued or was
used already (HTTP 401 at the handshake); an acknowledgement naming no envelope it sent, or
carrying a payload the envelope does not accept (`problems`). Slack redelivers an Events API
envelope its app did not acknowledge; here that happens when the connection it went out on
ends first (on the next connection, or another one still open) and when a test calls
`redeliver` (Slack's retry after its 3-second wait), each time with `retry_attempt` one higher.
Interactive and slash-command envelopes are not redelivered: Slack shows the person an error
instead, and the envelope stays unacknowledged here.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from aiohttp import WSMsgType, web

APP_TOKEN = "xapp-1-A0DEMO-1-standin0app0token"
"""The app-level token the stand-in's app has (what `SLACK_APP_TOKEN` should be set to)."""

EnvelopeType = Literal["events_api", "interactive", "slash_commands"]
RETRIED: frozenset[str] = frozenset({"events_api"})
"""The envelope types Slack delivers again when they go unacknowledged."""


@dataclass
class Ack:
    """An acknowledgement as the stand-in received it."""

    message: dict[str, Any]
    at: float
    attempt: int
    """Which delivery of the envelope (0: the first) had gone out when it arrived."""

    @property
    def payload(self) -> dict[str, Any] | None:
        payload = self.message.get("payload")
        return payload if isinstance(payload, dict) else None


@dataclass
class Envelope:
    envelope_id: str
    type: EnvelopeType
    payload: dict[str, Any]
    accepts_response_payload: bool
    attempts: int = 0
    """Deliveries so far (a redelivery carries `retry_attempt` = attempts - 1)."""
    connections: list[int] = field(default_factory=list)
    """The connections (numbered from 1 as they opened) each delivery went out on."""
    acks: list[Ack] = field(default_factory=list)
    _on: _Connection | None = field(default=None, repr=False, compare=False)
    _acked: asyncio.Event = field(default_factory=asyncio.Event, repr=False, compare=False)

    @property
    def acked(self) -> bool:
        return self._acked.is_set()

    @property
    def ack(self) -> Ack | None:
        return self.acks[0] if self.acks else None

    async def wait_acked(self, within: float = 30.0) -> Ack:
        async with asyncio.timeout(within):
            await self._acked.wait()
        assert self.acks
        return self.acks[0]

    def message(self, retry_reason: str) -> dict[str, Any]:
        sent: dict[str, Any] = {
            "envelope_id": self.envelope_id,
            "type": self.type,
            "payload": self.payload,
            "accepts_response_payload": self.accepts_response_payload,
        }
        if self.type == "events_api":
            sent["retry_attempt"] = self.attempts
            sent["retry_reason"] = retry_reason if self.attempts else ""
        return sent


@dataclass(eq=False)
class _Connection:
    number: int
    ws: web.WebSocketResponse
    request: web.Request


AckHook = Callable[[Envelope], Awaitable[None]]


class SocketModeStandIn:
    def __init__(
        self,
        *,
        app_token: str = APP_TOKEN,
        app_id: str = "A0DEMO",
        on_ack: AckHook | None = None,
        spread: bool = False,
    ) -> None:
        """`on_ack`: awaited as each acknowledgement arrives, before it is recorded (a test
        looks at the database at that moment). `spread`: envelopes go to the open connections
        in turn, as Slack spreads them over an app's connections (up to 10), instead of all to
        the newest."""
        self.app_token = app_token
        self.app_id = app_id
        self.on_ack = on_ack
        self.spread = spread
        self._turn = itertools.count()
        self.envelopes: list[Envelope] = []
        self.problems: list[str] = []
        """Acknowledgements Slack would not take: they name no envelope sent, or carry a
        payload the envelope does not accept."""
        self.opened = 0
        """Connections the app opened (handshakes that succeeded)."""
        self.issued = 0
        """URLs handed out by `apps.connections.open`."""
        self._live: list[_Connection] = []
        self._tickets: set[str] = set()
        self._pending: list[tuple[Envelope, str]] = []
        self._numbers = itertools.count(1)
        self._changed = asyncio.Condition()
        self._sock: socket.socket | None = None
        self._runner: web.AppRunner | None = None

    # lifecycle -----------------------------------------------------------------------------

    async def start(self) -> SocketModeStandIn:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        app = web.Application()
        app.router.add_get("/link/", self._link)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()
        return self

    async def stop(self) -> None:
        await self.drop(abrupt=False)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def __aenter__(self) -> SocketModeStandIn:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("the Socket Mode stand-in is not running")
        port: int = self._sock.getsockname()[1]
        return port

    @property
    def live(self) -> int:
        """Connections open now."""
        return len(self._live)

    # apps.connections.open -----------------------------------------------------------------

    def connections_open(self, token: str) -> dict[str, Any]:
        """`apps.connections.open`'s answer for an app-level `token`."""
        if token != self.app_token:
            return {"ok": False, "error": "invalid_auth"}
        ticket = uuid.uuid4().hex
        self._tickets.add(ticket)
        self.issued += 1
        return {
            "ok": True,
            "url": f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.app_id}",
        }

    # what Slack sends ----------------------------------------------------------------------

    async def send(self, kind: EnvelopeType, payload: dict[str, Any]) -> Envelope:
        """Deliver an envelope now on the newest connection, or on the next one opened (a
        test may send a payload that is not an object, which Slack never does, to see it
        refused)."""
        envelope = Envelope(
            envelope_id=str(uuid.uuid4()),
            type=kind,
            payload=payload,
            # What Slack lets an app answer in its ack: a slash command's message, a view
            # submission's `response_action`; not an event nor a click.
            accepts_response_payload=kind == "slash_commands"
            or (isinstance(payload, dict) and payload.get("type") == "view_submission"),
        )
        self.envelopes.append(envelope)
        await self._deliver(envelope, "")
        return envelope

    async def events_api(self, body: dict[str, Any]) -> Envelope:
        """An Events API `event_callback` body (`SlackDriver.envelope`)."""
        return await self.send("events_api", body)

    async def interactive(self, payload: dict[str, Any]) -> Envelope:
        return await self.send("interactive", payload)

    async def slash_command(self, form: dict[str, str]) -> Envelope:
        """A slash command's fields (`SlackDriver.command_form`), as Slack sends them here."""
        return await self.send("slash_commands", dict(form))

    async def redeliver(self, envelope: Envelope, reason: str = "timeout") -> None:
        """Slack's retry of an Events API envelope (it had no ack in time, or so it thinks)."""
        if envelope.type not in RETRIED:
            raise ValueError(f"Slack does not redeliver {envelope.type} envelopes")
        await self._deliver(envelope, reason)

    async def disconnect(self, reason: str = "refresh_requested") -> None:
        """Ask every open connection to reconnect (Slack keeps the old one open a little while;
        the app closes it)."""
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": "standin"}}
        for connection in list(self._live):
            with contextlib.suppress(ConnectionError):
                await connection.ws.send_json(message)

    async def drop(self, *, abrupt: bool = True) -> None:
        """End every open connection: `abrupt`, the TCP connection is cut with no close frame
        (a network failure); otherwise a close frame is sent first."""
        for connection in list(self._live):
            if abrupt:
                transport = connection.request.transport
                if transport is not None:
                    transport.abort()
            else:
                await connection.ws.close()
        await self.wait_for(lambda: not self._live, what="the connections ended")

    async def wait_for(
        self, check: Callable[[], bool], within: float = 30.0, what: str = ""
    ) -> None:
        """Wait until `check()` holds; it is looked at whenever a connection opens or ends."""
        async with asyncio.timeout(within), self._changed:
            await self._changed.wait_for(check)

    async def connected(self, count: int = 1, within: float = 30.0) -> None:
        """Wait until the app has opened `count` connections in all and one is open."""
        await self.wait_for(lambda: self.opened >= count and bool(self._live), within)

    # the websocket -------------------------------------------------------------------------

    async def _link(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:
            return web.Response(status=401, text="invalid or used ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        connection = _Connection(number=next(self._numbers), ws=ws, request=request)
        self._live.append(connection)
        self.opened += 1
        try:
            await ws.send_json(
                {
                    "type": "hello",
                    "num_connections": len(self._live),
                    "debug_info": {
                        "host": "standin",
                        "build_number": 1,
                        "approximate_connection_time": 3600,
                    },
                    "connection_info": {"app_id": self.app_id},
                }
            )
            pending, self._pending = self._pending, []
            for envelope, reason in pending:
                await self._send_on(connection, envelope, reason)
            await self._notify()
            async for message in ws:
                if message.type == WSMsgType.TEXT:
                    await self._on_text(message.data)
        finally:
            self._live.remove(connection)
            await self._redeliver_from(connection)
            await self._notify()
        return ws

    async def _on_text(self, text: str) -> None:
        try:
            message = json.loads(text)
        except ValueError:
            self.problems.append("a message that is not JSON")
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        envelope = next((e for e in self.envelopes if e.envelope_id == envelope_id), None)
        if envelope is None:
            self.problems.append("an acknowledgement naming no envelope sent")
            return
        if "payload" in message and not envelope.accepts_response_payload:
            self.problems.append(f"a payload in the ack of an {envelope.type} envelope")
        if self.on_ack is not None:
            await self.on_ack(envelope)
        envelope.acks.append(Ack(message=message, at=time.time(), attempt=envelope.attempts - 1))
        envelope._acked.set()

    async def _deliver(self, envelope: Envelope, reason: str) -> None:
        if self._live:
            index = next(self._turn) % len(self._live) if self.spread else -1
            await self._send_on(self._live[index], envelope, reason)
        else:
            self._pending.append((envelope, reason))

    async def _send_on(self, connection: _Connection, envelope: Envelope, reason: str) -> None:
        message = envelope.message(reason)
        envelope.attempts += 1
        envelope.connections.append(connection.number)
        envelope._on = connection
        with contextlib.suppress(ConnectionError):  # it ended: `_redeliver_from` sends it again
            await connection.ws.send_json(message)

    async def _redeliver_from(self, connection: _Connection) -> None:
        """What went out on a connection that ended without its ack: sent again (events)."""
        for envelope in self.envelopes:
            if envelope._on is connection and not envelope.acked and envelope.type in RETRIED:
                envelope._on = None
                await self._deliver(envelope, "timeout")

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()
