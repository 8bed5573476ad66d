"""Slack's side of an offline `bot serve`, over HTTP: what a person does in a thread, as JSON.

The offline bot's Slack is a stand-in in its own process, and its signing secret is generated
at start and never shown, so nothing outside can sign a Slack request. These routes play the
person instead: each action is sent by the stand-in's driver as Slack sends it, signed, to this
same server's `/slack/events`, so the bot checks and decides exactly as it does in production (a
click by someone who may not answer is refused by the bot, not here).

    POST /offline/slack/messages   {"user": "U0ALICE", "text": "...", "thread_ts"?, "channel"?}
    GET  /offline/slack/threads/{channel}/{thread_ts}
    POST /offline/slack/answers    {"user", "channel", "message_ts", "approve": bool, "reason"?}

They exist only in offline mode (`bot.cli.offline`); bad input is a 400 naming what is wrong, an
unknown thread or message a 404, never a 5xx.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.slack.approval_blocks import APPROVE, DENY
from bot.slack.deny_modal import REASON_ACTION, REASON_BLOCK
from bot.testing import SlackDriver, SlackStandIn

CHANNEL = "C0OPS"
"""Where a message without a channel goes: the example agent's own (`OPS_CHANNEL`'s default)."""
MAX_TEXT = 40_000
USER = re.compile(r"U[A-Z0-9]{2,20}")
CHANNEL_ID = re.compile(r"[CG][A-Z0-9]{2,20}")


class BadInput(Exception):
    def __init__(self, why: str, status: int = 400) -> None:
        super().__init__(why)
        self.status = status


class OfflineSlack:
    def __init__(self, standin: SlackStandIn, secret: str) -> None:
        self.standin = standin
        self._secret = secret

    def routes(self) -> list[Route]:
        return [
            Route("/offline/slack/messages", self._json(self._say), methods=["POST"]),
            Route("/offline/slack/answers", self._json(self._answer), methods=["POST"]),
            Route("/offline/slack/threads/{channel}/{thread_ts}", self._thread, methods=["GET"]),
        ]

    def _driver(self, request: Request) -> SlackDriver:
        """A driver posting to the socket this request came in on (never to the `Host` the
        request names: that is the caller's to choose)."""
        host, port = request.scope.get("server") or ("127.0.0.1", 3000)
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
        shown = f"[{host}]" if ":" in host else host
        return SlackDriver(f"http://{shown}:{port}", self._secret, standin=self.standin)

    def _json(
        self, handler: Callable[[SlackDriver, dict[str, Any]], Awaitable[dict[str, Any]]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                return JSONResponse({"error": "send application/json"}, status_code=415)
            try:
                body = json.loads(await request.body())
                if not isinstance(body, dict):
                    raise BadInput("the body is a JSON object")
                async with self._driver(request) as slack:
                    return JSONResponse(await handler(slack, body))
            except (UnicodeDecodeError, json.JSONDecodeError):
                return JSONResponse({"error": "the body is not UTF-8 JSON"}, status_code=400)
            except BadInput as err:
                return JSONResponse({"error": str(err)}, status_code=err.status)

        return endpoint

    async def _say(self, slack: SlackDriver, body: dict[str, Any]) -> dict[str, Any]:
        """A message mentioning the bot starts a thread; with `thread_ts`, a reply in it."""
        user, channel = _matching(body, "user", USER), _channel(body)
        text = body.get("text")
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
            raise BadInput(f"`text` is a string of 1 to {MAX_TEXT:,} characters")
        thread = body.get("thread_ts")
        if thread is None:
            ts = await slack.mention(user, text, channel=channel, twin=True)
            return {"channel": channel, "ts": ts, "thread_ts": ts}
        if not isinstance(thread, str) or self.standin.find(channel, thread) is None:
            raise BadInput("no such thread in this channel", 404)
        ts = await slack.reply(user, text, channel=channel, thread_ts=thread)
        return {"channel": channel, "ts": ts, "thread_ts": thread}

    async def _answer(self, slack: SlackDriver, body: dict[str, Any]) -> dict[str, Any]:
        """Approve, or Deny with a reason (the bot's modal, filled in and submitted)."""
        user, channel = _matching(body, "user", USER), _channel(body)
        approve, reason = body.get("approve"), body.get("reason", "")
        if not isinstance(approve, bool) or not isinstance(reason, str):
            raise BadInput("`approve` is true or false, `reason` a string")
        ts = body.get("message_ts")
        message = self.standin.find(channel, ts) if isinstance(ts, str) else None
        if message is None:
            raise BadInput("no such message in this channel", 404)
        button = _button(message.blocks, APPROVE if approve else DENY)
        modals = len(self.standin.modals)
        clicked = await slack.click(
            user, button, channel=channel, message_ts=message.ts, thread_ts=message.thread_ts
        )
        # The bot handles a click before it answers it (Bolt's `process_before_response`), so
        # by now a Deny it may take has opened the reason modal; one it refused opened none.
        modal = None if approve else _opened(self.standin, user, modals)
        if modal is None:
            return {"status": clicked.status_code}
        values = {REASON_BLOCK: {REASON_ACTION: reason}}
        submitted = await slack.submit(user, modal, values)
        return {"status": submitted.status_code}

    async def _thread(self, request: Request) -> Response:
        channel, thread = request.path_params["channel"], request.path_params["thread_ts"]
        messages = self.standin.thread(channel, thread)
        if not messages:
            return JSONResponse({"error": "no such thread in this channel"}, status_code=404)
        return JSONResponse(
            {
                "channel": channel,
                "thread_ts": thread,
                "shown": self.standin.render_thread(channel, thread),
                "messages": [
                    {
                        "ts": m.ts,
                        "from": "agent" if m.bot_id else m.user,
                        "text": m.text,
                        "streaming": m.streaming,
                        "buttons": [_label(b) for b in _buttons(m.blocks)],
                    }
                    for m in messages
                ],
            }
        )


def _matching(body: dict[str, Any], key: str, shape: re.Pattern[str]) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not shape.fullmatch(value):
        raise BadInput(f"`{key}` is a Slack id such as U0ALICE")
    return value


def _channel(body: dict[str, Any]) -> str:
    if body.get("channel") is None:
        return CHANNEL
    return _matching(body, "channel", CHANNEL_ID)


def _buttons(blocks: list[Any] | None) -> list[dict[str, Any]]:
    return [
        {**element, "block_id": block.get("block_id")}
        for block in blocks or []
        if isinstance(block, dict) and block.get("type") == "actions"
        for element in block.get("elements", [])
        if isinstance(element, dict) and element.get("type") == "button"
    ]


def _button(blocks: list[Any] | None, action_id: str) -> dict[str, Any]:
    for button in _buttons(blocks):
        if button.get("action_id") == action_id:
            return button
    raise BadInput("that message has no Approve / Deny buttons (answered already?)", 404)


def _label(button: dict[str, Any]) -> str:
    return str((button.get("text") or {}).get("text", ""))


def _opened(standin: SlackStandIn, user: str, before: int) -> str | None:
    for view in standin.modals[before:]:
        if view.user == user:
            return view.id
    return None
