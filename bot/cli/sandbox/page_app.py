"""The sandbox page's own small web app: the page, its JSON state, and the person's actions.

Every action is played by the `SlackDriver` as Slack would send it to the bot (a signed
`app_mention` or thread message, a `block_actions` click naming a button the stand-in's
message or Home view holds, `view_submission`, `agent_session_stopped`, `app_home_opened`),
so the bot decides exactly as it does for Slack: a click by someone who may not answer is
refused by the bot, not by this page. Bad input is a 400 naming what is wrong; a button the
stand-in does not hold is a 404 (the page never makes one up).
"""

from __future__ import annotations

import html
import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from bot.cli.sandbox.state import Channel, Person, snapshot
from bot.slack.deny_modal import REASON_ACTION, REASON_BLOCK
from bot.testing import SlackDriver, SlackStandIn
from bot.testing.workspace import Message

Action = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""One of the person's actions: the request's JSON object in, the answer's out."""
MAX_TEXT = 40_000
"""Slack's own limit on a message's text."""
OFFLINE_NOTE = (
    "the bot against a local Slack stand-in · offline scripted model · no token, no network"
)
"""The page's header as `page.html` has it; `note=` says another model is answering."""


class BadInput(Exception):
    def __init__(self, why: str, status: int = 400) -> None:
        super().__init__(why)
        self.status = status


class SandboxPage:
    def __init__(
        self,
        standin: SlackStandIn,
        driver: SlackDriver,
        *,
        people: list[Person],
        channels: list[Channel],
        note: str = OFFLINE_NOTE,
    ) -> None:
        self.standin = standin
        self.driver = driver
        self.people = {p.id: p for p in people}
        self.channels = {c.id: c for c in channels}
        self.dismissed: set[str] = set()
        page = resources.files("bot.cli.sandbox").joinpath("page.html").read_text("utf-8")
        self.page = page.replace(OFFLINE_NOTE, html.escape(note))
        self.app = Starlette(
            # A page on 127.0.0.1 only: a rebinding DNS name pointing here is refused (400).
            middleware=[
                Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"])
            ],
            routes=[
                Route("/", self._index, methods=["GET"]),
                Route("/api/people", self._people, methods=["GET"]),
                Route("/api/state", self._state, methods=["GET"]),
                Route("/api/say", self._action(self._say), methods=["POST"]),
                Route("/api/click", self._action(self._click), methods=["POST"]),
                Route("/api/feedback", self._action(self._feedback), methods=["POST"]),
                Route("/api/stop", self._action(self._stop), methods=["POST"]),
                Route("/api/home", self._action(self._open_home), methods=["POST"]),
                Route("/api/home/click", self._action(self._home_click), methods=["POST"]),
                Route("/api/modal/submit", self._action(self._submit), methods=["POST"]),
                Route("/api/modal/close", self._action(self._close), methods=["POST"]),
            ],
        )

    # reading -------------------------------------------------------------------------------

    async def _index(self, request: Request) -> Response:
        return HTMLResponse(self.page, headers={"Cache-Control": "no-store"})

    async def _people(self, request: Request) -> Response:
        """Who the page may speak as (the first is the default)."""
        people = [{"id": p.id, "name": p.name, "role": p.role} for p in self.people.values()]
        return JSONResponse({"people": people, "channels": list(self.channels)})

    async def _state(self, request: Request) -> Response:
        viewer = request.query_params.get("as", "")
        if viewer not in self.people:
            return JSONResponse({"error": f"unknown person {viewer!r}"}, status_code=400)
        state = snapshot(
            self.standin,
            viewer=viewer,
            people=list(self.people.values()),
            channels=list(self.channels.values()),
            dismissed=self.dismissed,
        )
        return JSONResponse(state, headers={"Cache-Control": "no-store"})

    # acting --------------------------------------------------------------------------------

    def _action(self, handler: Action) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            # JSON only: a cross-site form (text/plain, no preflight) cannot act as anyone.
            if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
                return JSONResponse({"error": "send application/json"}, status_code=415)
            try:
                body = json.loads(await request.body())
            except UnicodeDecodeError:
                return JSONResponse({"error": "the body is not UTF-8"}, status_code=400)
            except json.JSONDecodeError:
                return JSONResponse({"error": "the body is not JSON"}, status_code=400)
            try:
                if not isinstance(body, dict):
                    raise BadInput("the body is a JSON object")
                return JSONResponse(await handler(body))
            except BadInput as err:
                return JSONResponse({"error": str(err)}, status_code=err.status)

        return endpoint

    def _person(self, body: dict[str, Any]) -> str:
        user = body.get("as")
        if user not in self.people:
            raise BadInput(f"unknown person {user!r}")
        return str(user)

    def _channel(self, body: dict[str, Any]) -> str:
        channel = body.get("channel")
        if channel not in self.channels:
            raise BadInput(f"unknown channel {channel!r}")
        return str(channel)

    def _string(self, body: dict[str, Any], key: str) -> str:
        value = body.get(key)
        if not isinstance(value, str) or not value:
            raise BadInput(f"`{key}` is a non-empty string")
        return value

    async def _say(self, body: dict[str, Any]) -> dict[str, Any]:
        """A new message mentioning the bot starts a thread; in a thread, a reply."""
        user, channel = self._person(body), self._channel(body)
        text = self._string(body, "text").strip()
        if not text or len(text) > MAX_TEXT:
            raise BadInput(f"a message has 1 to {MAX_TEXT:,} characters")
        thread = body.get("thread_ts")
        if thread is None:
            ts = await self.driver.mention(user, text, channel=channel, twin=True)
            return {"ts": ts, "thread_ts": ts}
        if not isinstance(thread, str) or self.standin.find(channel, thread) is None:
            raise BadInput("no such thread in this channel", 404)
        ts = await self.driver.reply(user, text, channel=channel, thread_ts=thread)
        return {"ts": ts, "thread_ts": thread}

    def _held(self, channel: str, ts: str) -> Message:
        message = self.standin.find(channel, ts)
        if message is None:
            raise BadInput("no such message", 404)
        return message

    async def _click(self, body: dict[str, Any]) -> dict[str, Any]:
        user, channel = self._person(body), self._channel(body)
        message = self._held(channel, self._string(body, "message_ts"))
        button = _button(message.blocks, self._string(body, "action_id"), body.get("block_id"))
        response = await self.driver.click(
            user,
            button,
            channel=channel,
            message_ts=message.ts,
            thread_ts=message.thread_ts,
        )
        return {"status": response.status_code}

    async def _feedback(self, body: dict[str, Any]) -> dict[str, Any]:
        user, channel = self._person(body), self._channel(body)
        message = self._held(channel, self._string(body, "message_ts"))
        element = next(
            (
                dict(e)
                for b in message.blocks or []
                if b.get("type") == "context_actions"
                for e in b.get("elements", [])
                if e.get("type") == "feedback_buttons"
            ),
            None,
        )
        if element is None:
            raise BadInput("that message has no feedback buttons", 404)
        response = await self.driver.feedback(
            user,
            element,
            body.get("positive") is True,
            channel=channel,
            message_ts=message.ts,
            thread_ts=message.thread_ts,
        )
        return {"status": response.status_code}

    async def _stop(self, body: dict[str, Any]) -> dict[str, Any]:
        user, channel = self._person(body), self._channel(body)
        thread = self._held(channel, self._string(body, "thread_ts"))
        response = await self.driver.stop(user, channel=channel, thread_ts=thread.ts)
        return {"status": response.status_code}

    async def _open_home(self, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.driver.open_home(self._person(body))
        return {"status": response.status_code}

    async def _home_click(self, body: dict[str, Any]) -> dict[str, Any]:
        user = self._person(body)
        view = self.standin.home_views.get(user)
        if view is None:
            raise BadInput("that person has no Home tab published", 404)
        blocks = view.body.get("blocks", [])
        button = _button(blocks, self._string(body, "action_id"), body.get("block_id"))
        response = await self.driver.click_in_home(user, button)
        return {"status": response.status_code}

    async def _submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """The Deny modal's submit: the typed reason, as Slack sends a plain text input."""
        user, view_id = self._person(body), self._string(body, "view_id")
        self._modal_of(user, view_id)
        reason = body.get("reason", "")
        if not isinstance(reason, str):
            raise BadInput("`reason` is a string")
        values = {REASON_BLOCK: {REASON_ACTION: reason}}
        response = await self.driver.submit(user, view_id, values)
        errors = _modal_errors(response.content)
        if response.status_code == 200 and not errors:
            self.dismissed.add(view_id)  # Slack closes a modal whose submission is taken
        return {"status": response.status_code, "errors": errors}

    async def _close(self, body: dict[str, Any]) -> dict[str, Any]:
        user, view_id = self._person(body), self._string(body, "view_id")
        self._modal_of(user, view_id)
        self.dismissed.add(view_id)
        return {"closed": view_id}

    def _modal_of(self, user: str, view_id: str) -> None:
        if not any(v.id == view_id and v.user == user for v in self.standin.modals):
            raise BadInput("no such modal open for that person", 404)


def _button(blocks: list[Any] | None, action_id: str, block_id: Any) -> dict[str, Any]:
    """The button as the message (or view) holds it: the click sends its own value."""
    for block in blocks or []:
        if block.get("type") != "actions" or (block_id and block.get("block_id") != block_id):
            continue
        for element in block.get("elements", []):
            if element.get("type") == "button" and element.get("action_id") == action_id:
                return {**element, "block_id": block.get("block_id")}
    raise BadInput("that message has no such button", 404)


def _modal_errors(content: bytes) -> Any:
    """The errors a `view_submission` ack keeps the modal open with (`response_action:
    "errors"`), or None: an empty ack closes it."""
    try:
        answer = json.loads(content) if content else {}
    except ValueError:
        return None
    if isinstance(answer, dict) and answer.get("response_action") == "errors":
        return answer.get("errors")
    return None
