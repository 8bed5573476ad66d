"""A local stand-in for the Slack Web API, served over real HTTP on a free port.

It answers the methods the bot calls the way Slack does (HTTP 200 with `{"ok": false, "error"}`
for refusals, 429 with `Retry-After` when rate limited), takes JSON, form and query bodies, keeps
messages per channel (streams included), and records every call. Faults are queued per method:

    standin.fail("chat.appendStream", "ratelimited", times=5, retry_after=1)
    standin.fail("chat.appendStream", "not_in_streaming_state")
    standin.fail("chat.postMessage", "server_error", applied=True)   # posted, then a 500
    standin.fail("chat.postMessage", "hang", applied=True)           # posted, never answered

`response_url` posts land in `standin.responses`. A small control API (`/_standin/...`) lets a
process that does not hold the object (the benchmark) read calls and queue faults.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.asgi_server import BackgroundServer
from bot.testing.workspace import STREAM_ERROR, Call, Message, Workspace

JSON_FIELDS = ("blocks", "metadata", "chunks", "attachments")

Handler = Callable[[dict[str, Any]], dict[str, Any]]


class SlackStandIn(Workspace):
    def __init__(
        self,
        *,
        team_id: str = "T0DEMO",
        team_name: str = "Demo Team",
        bot_user_id: str = "U0BOT",
        bot_id: str = "B0BOT",
        clock: Callable[[], float] = time.time,
        stream_max_age: float | None = None,
        status_channels: tuple[str, ...] = ("D",),
    ) -> None:
        super().__init__(
            team_id=team_id,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            clock=clock,
            stream_max_age=stream_max_age,
        )
        self.team_name = team_name
        self.status_channels = status_channels
        self._server: BackgroundServer | None = None
        self._methods: dict[str, Handler] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "assistant.threads.setStatus": self._set_status,
            "conversations.replies": self._replies,
            "conversations.history": self._history,
        }
        self.app = Starlette(
            routes=[
                Route("/api/{method}", self._api, methods=["GET", "POST"]),
                Route("/response/{token}", self._response_url, methods=["POST"]),
                Route("/_standin/fault", self._control_fault, methods=["POST"]),
                Route("/_standin/calls", self._control_calls, methods=["GET"]),
            ]
        )

    # lifecycle -----------------------------------------------------------------------------

    async def start(self, port: int = 0) -> SlackStandIn:
        self._server = await BackgroundServer(self.app, port=port).start()
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop()
            self._server = None

    async def __aenter__(self) -> SlackStandIn:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stand-in is not running")
        return self._server.url

    @property
    def api_url(self) -> str:
        """What `SLACK_API_URL` should be set to."""
        return f"{self.url}/api/"

    def response_url(self, token: str) -> str:
        return f"{self.url}/response/{token}"

    def add_user_message(
        self, channel: str, ts: str, user: str, text: str, thread_ts: str | None = None
    ) -> None:
        """Put a person's message in the channel, so a thread reads whole (the driver calls it)."""
        self.add(Message(channel=channel, ts=ts, user=user, text=text, thread_ts=thread_ts))

    # HTTP ----------------------------------------------------------------------------------

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        args = await _read_args(request)
        auth = request.headers.get("authorization", "")
        fault = self.take_fault(method)
        call = Call(method=method, args=args, at=self.clock())
        self.calls.append(call)
        if fault is not None and fault.kind == "ratelimited":
            call.status = 429
            call.response = {"ok": False, "error": "ratelimited"}
            return JSONResponse(
                call.response, status_code=429, headers={"Retry-After": str(fault.retry_after)}
            )
        if fault is not None and fault.kind == "hang":
            # Do the work, then never answer: the caller cannot know it happened (until it
            # looks), which is what a crash right after a successful call looks like.
            if fault.applied:
                call.response = self._dispatch(method, args)
            await asyncio.sleep(3600)
        if fault is not None and fault.kind == "server_error":
            if fault.applied:
                self._dispatch(method, args)
            call.status = 500
            return Response("internal error", status_code=500)
        if not auth.startswith("Bearer xox") and "token" not in args:
            call.response = {"ok": False, "error": "not_authed"}
        elif fault is not None:
            call.response = self._fault_answer(fault.kind, args)
        else:
            call.response = self._dispatch(method, args)
        return JSONResponse(call.response)

    def _dispatch(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        handler = self._methods.get(method)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        return handler(args)

    def _fault_answer(self, kind: str, args: dict[str, Any]) -> dict[str, Any]:
        if kind == "not_in_streaming_state":
            message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
            if message is not None:
                message.streaming = False
            return {"ok": False, "error": STREAM_ERROR}
        return {"ok": False, "error": kind.removeprefix("error:")}

    async def _response_url(self, request: Request) -> Response:
        body = await _read_args(request)
        self.responses.append({"token": request.path_params["token"], **body})
        return JSONResponse({"ok": True})

    async def _control_fault(self, request: Request) -> Response:
        body = await request.json()
        self.fail(
            body["method"],
            body["kind"],
            times=int(body.get("times", 1)),
            retry_after=int(body.get("retry_after", 1)),
        )
        return JSONResponse({"ok": True})

    async def _control_calls(self, request: Request) -> Response:
        method = request.query_params.get("method")
        calls = [c for c in self.calls if method is None or c.method == method]
        return JSONResponse(
            {"calls": [{"method": c.method, "status": c.status, "at": c.at} for c in calls]}
        )

    # methods -------------------------------------------------------------------------------

    def _auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://demo.slack.invalid/",
            "team": self.team_name,
            "user": "agent",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _bot_message(self, args: dict[str, Any], **extra: Any) -> Message:
        return self.add(
            Message(
                channel=str(args["channel"]),
                ts=self.next_ts(),
                bot_id=self.bot_id,
                user=self.bot_user_id,
                thread_ts=args.get("thread_ts") or None,
                text=str(args.get("text") or args.get("markdown_text") or ""),
                blocks=args.get("blocks"),
                metadata=args.get("metadata"),
                **extra,
            )
        )

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not (args.get("text") or args.get("blocks")):
            return {"ok": False, "error": "no_text"}
        message = self._bot_message(args)
        return {
            "ok": True,
            "channel": message.channel,
            "ts": message.ts,
            "message": message.to_json(),
        }

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.bot_id != self.bot_id:
            return {"ok": False, "error": "cant_update_message"}
        if "text" in args:
            message.text = str(args["text"])
        if "blocks" in args:
            message.blocks = args["blocks"]
        if "metadata" in args:
            message.metadata = args["metadata"]
        message.tasks = {} if "text" in args else message.tasks
        message.edited += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        message.deleted = True
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        self.ephemerals.append(dict(args))
        return {"ok": True, "message_ts": self.next_ts()}

    def _start_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if not args.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        message = self._bot_message(
            {**args, "text": ""}, streaming=True, stream_started=self.clock()
        )
        self._apply_stream(message, args)
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _append_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if self.stream_expired(message):
            message.streaming = False
            return {"ok": False, "error": STREAM_ERROR}
        self._apply_stream(message, args)
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _stop_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        result = self._append_stream(args)
        if not result["ok"]:
            return result
        message = self.find(str(args["channel"]), str(args["ts"]))
        assert message is not None
        message.streaming = False
        if args.get("blocks"):
            message.blocks = args["blocks"]
        if args.get("metadata"):
            message.metadata = args["metadata"]
        return {
            "ok": True,
            "channel": message.channel,
            "ts": message.ts,
            "message": message.to_json(),
        }

    def _apply_stream(self, message: Message, args: dict[str, Any]) -> None:
        if args.get("markdown_text"):
            message.text += str(args["markdown_text"])
        for chunk in args.get("chunks") or []:
            if chunk.get("type") == "markdown_text":
                message.text += str(chunk.get("text", ""))
            elif chunk.get("type") == "task_update":
                task = message.tasks.setdefault(str(chunk["id"]), {})
                task.update({k: v for k, v in chunk.items() if k != "type"})

    def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = str(args.get("channel_id", ""))
        if not channel.startswith(self.status_channels):
            return {"ok": False, "error": "not_allowed"}
        self.statuses.append(dict(args))
        return {"ok": True}

    def _replies(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        found = self.thread(channel, ts)
        if not found and not self.messages.get(channel):
            return {"ok": False, "error": "thread_not_found"}
        with_metadata = _truthy(args.get("include_all_metadata"))
        return {
            "ok": True,
            "messages": [m.to_json(with_metadata=with_metadata) for m in found],
            "has_more": False,
        }

    def _history(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = str(args.get("channel", ""))
        oldest = float(args.get("oldest") or 0)
        with_metadata = _truthy(args.get("include_all_metadata"))
        found = [m for m in self.top_level(channel) if float(m.ts) >= oldest]
        return {
            "ok": True,
            "messages": [m.to_json(with_metadata=with_metadata) for m in reversed(found)],
            "has_more": False,
        }


def _truthy(value: Any) -> bool:
    return value in (True, 1, "1", "true", "True")


async def _read_args(request: Request) -> dict[str, Any]:
    """Slack takes the same arguments as a query string, a form, or JSON; so does this."""
    args: dict[str, Any] = dict(request.query_params)
    raw = await request.body()
    ctype = request.headers.get("content-type", "")
    if raw and "json" in ctype:
        body = json.loads(raw)
        if isinstance(body, dict):
            args.update(body)
    elif raw:
        args.update(dict(parse_qsl(raw.decode(), keep_blank_values=True)))
    for key in JSON_FIELDS:
        value = args.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            args[key] = json.loads(value)
    return args
