"""The signed-request driver's core: one workspace's identity, request signing, the Events API
envelope (https://docs.slack.dev/apis/events-api/#callback-field), trigger ids and timestamps.

Signatures come from `slack_sdk.signature.SignatureVerifier`, the same code Bolt checks them with,
so a request signed here is one Slack's own signing would produce.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any, Self

import httpx
from slack_sdk.signature import SignatureVerifier

from bot.testing.http import local_client
from bot.testing.standin import SlackStandIn

_MESSAGE_TS = itertools.count(1)
"""Shared by every driver of the process (see `new_ts`)."""

DOMAIN = "demo"
"""The stand-in workspace's domain (`demo.slack.com`)."""


def sign_request(secret: str, body: str, timestamp: int | None = None) -> dict[str, str]:
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": signature}


class DriverCore:
    """What every payload the driver sends is built on: the workspace it plays, signing,
    the Events API envelope, trigger ids and timestamps."""

    def __init__(
        self,
        app_url: str,
        signing_secret: str,
        *,
        standin: SlackStandIn | None = None,
        team_id: str = "T0DEMO",
        bot_user_id: str = "U0BOT",
        api_app_id: str = "A0DEMO",
        path: str = "/slack/events",
        timeout: float = 10.0,
        enterprise_id: str | None = None,
    ) -> None:
        self.url = app_url.rstrip("/") + path
        self.secret = signing_secret
        self.standin = standin
        self.team_id = team_id
        self.enterprise_id = enterprise_id
        """Set for a workspace of an Enterprise Grid org: events and clicks then name it."""
        self.bot_user_id = bot_user_id
        self.api_app_id = api_app_id
        self.http = local_client(timeout=timeout)
        self._ids = itertools.count(1)
        self._base = int(time.time()) - 10_000

    async def aclose(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def new_ts(self) -> str:
        """A message ts no driver of this process has used: Slack never gives two messages of a
        channel one ts, and the bot takes a repeated one for a redelivery of the same message
        (two drivers made in the same second once collided, and the second message was lost)."""
        return f"{self._base}.{next(_MESSAGE_TS):06d}"

    def trigger(self, user: str) -> str:
        """A new `trigger_id`, issued (where there is a stand-in) as Slack issues one with each
        interaction: good for one `views.open` within three seconds."""
        trigger_id = f"{next(self._ids)}.{int(time.time())}.trigger"
        if self.standin is not None:
            self.standin.issue_trigger(trigger_id, user)
        return trigger_id

    def dm_channel(self, user: str) -> str:
        """The app's direct-message channel with `user` (its Messages tab)."""
        return "D" + user.removeprefix("U")

    # raw -----------------------------------------------------------------------------------

    async def send(
        self,
        body: str,
        *,
        content_type: str,
        timestamp: int | None = None,
        secret: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        signed = sign_request(secret or self.secret, body, timestamp)
        return await self.http.post(
            self.url,
            content=body.encode(),
            headers={"Content-Type": content_type, **signed, **(headers or {})},
        )

    def envelope(
        self, event: dict[str, Any], *, event_id: str | None = None, team_id: str | None = None
    ) -> dict[str, Any]:
        """The Events API's `event_callback` envelope; `team_id`: a workspace other than this
        driver's (the app installed there too)."""
        team = team_id or self.team_id
        envelope: dict[str, Any] = {
            "token": "legacy-verification-token",
            "team_id": team,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(self._ids):08d}",
            "event_time": int(time.time()),
            "authorizations": [
                {
                    "enterprise_id": self.enterprise_id,
                    "team_id": team,
                    "user_id": self.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
        }
        if self.enterprise_id:
            envelope["enterprise_id"] = self.enterprise_id
        return envelope

    async def post_event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        timestamp: int | None = None,
        secret: str | None = None,
        team_id: str | None = None,
    ) -> httpx.Response:
        headers = {}
        if retry_num:
            headers = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": "http_timeout"}
        body = json.dumps(self.envelope(event, event_id=event_id, team_id=team_id))
        return await self.send(
            body,
            content_type="application/json",
            timestamp=timestamp,
            secret=secret,
            headers=headers,
        )
