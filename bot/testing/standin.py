"""A local stand-in for the Slack Web API, served over real HTTP on a free port.

It answers the methods the bot calls the way Slack does (HTTP 200 with `{"ok": false, "error"}`
for refusals, 429 with `Retry-After` when rate limited), takes JSON, form and query bodies, keeps
messages per channel (streams included), and records every call. Faults are queued per method:

    standin.fail("chat.appendStream", "ratelimited", times=5, retry_after=1)
    standin.fail("chat.appendStream", "not_in_streaming_state")
    standin.fail("chat.postMessage", "server_error", applied=True)   # posted, then a 500
    standin.fail("chat.postMessage", "hang", applied=True)           # posted, answered only at stop

`response_url` posts land in `standin.responses`. A small control API (`/_standin/...`) lets a
process that does not hold the object (the benchmark) read calls and queue faults.

It is at least as strict as Slack where the bot could get it wrong: an argument the installed
`AsyncWebClient` method does not name is `invalid_arguments` (Slack ignores some of them silently,
which is worse: the bot believes something was stored that was not); history reads come in pages
of at most `page_size` messages, whatever `limit` asks ("fewer than the requested number of items
may be returned"), with `has_more` and `response_metadata.next_cursor`; `chat.update` keeps a
message's blocks, and what a stream showed, unless it is given `blocks` or `markdown_text`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bot.core.asgi_server import BackgroundServer
from bot.testing.agent_surfaces import AgentSurfaces
from bot.testing.blocks import blocks_problem, tasks_shown
from bot.testing.history_pages import page_of
from bot.testing.oauth import ACCESS, OAuthWorkspaces, bearer
from bot.testing.socket_mode import SocketModeStandIn
from bot.testing.wire import TRANSPORT_ARGS, read_args
from bot.testing.wire import sdk_arguments as sdk_arguments  # its tests name it here
from bot.testing.workspace import STREAM_ERROR, Call, Message

Handler = Callable[[dict[str, Any]], dict[str, Any]]
EVENTS = frozenset(
    {
        "app_mention",
        "message.channels",
        "message.groups",
        "message.im",
        "app_home_opened",
        "agent_session_stopped",
    }
)
"""What the app subscribes to by default: `manifest.yml`'s `bot_events`."""


class SlackStandIn(AgentSurfaces):
    def __init__(
        self,
        *,
        team_id: str = "T0DEMO",
        team_name: str = "Demo Team",
        bot_user_id: str = "U0BOT",
        bot_id: str = "B0BOT",
        clock: Callable[[], float] = time.time,
        stream_max_age: float | None = None,
        status_channels: tuple[str, ...] = ("C", "G", "D"),
        page_size: int = 100,
        events: frozenset[str] = EVENTS,
        agent_app: bool = True,
        home_tab: bool = True,
        domain: str = "demo",
        app_id: str = "A0DEMO",
    ) -> None:
        """`events`, `agent_app`, `home_tab`: the app's settings (its manifest), which decide
        what some methods take (see `bot.testing.agent_surfaces`)."""
        super().__init__(
            team_id=team_id,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            clock=clock,
            stream_max_age=stream_max_age,
        )
        self.team_name = team_name
        self.status_channels = status_channels
        self.page_size = page_size
        self.events = events
        self.agent_app = agent_app
        self.home_tab = home_tab
        self.domain = domain
        self.app_id = app_id
        self.oauth = OAuthWorkspaces(app_id=app_id)
        """Workspaces the app installs in, and their tokens (`bot.testing.oauth`)."""
        self._server: BackgroundServer | None = None
        self.socket_mode: SocketModeStandIn | None = None
        """The app's Socket Mode (`bot.testing.socket_mode`), once a test attaches one."""
        self._stopping = asyncio.Event()
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
            "assistant.threads.setSuggestedPrompts": self._set_suggested_prompts,
            "assistant.threads.setTitle": self._set_title,
            "agents.sessions.setStatus": self._set_session_status,
            "conversations.replies": self._replies,
            "conversations.history": self._history,
            "chat.getPermalink": self._permalink,
            "views.publish": self._publish,
            "views.open": self._open,
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
        self._stopping = asyncio.Event()
        self._server = await BackgroundServer(self.app, port=port).start()
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._stopping.set()  # calls left hanging (`fail(..., "hang")`) end now
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

    def bot_messages(self, channel: str | None = None) -> list[Message]:
        """The app's messages; installed in several workspaces, its bot's in each of them."""
        if not self.oauth.strict:
            return super().bot_messages(channel)
        bots = {team.bot_id for team in self.oauth.teams.values()}
        channels = [channel] if channel else list(self.messages)
        return [
            m
            for c in channels
            for m in self.messages.get(c, [])
            if m.bot_id in bots and not m.deleted
        ]

    def add_user_message(
        self, channel: str, ts: str, user: str, text: str, thread_ts: str | None = None
    ) -> None:
        """Put a person's message in the channel, so a thread reads whole (the driver calls it)."""
        self.add(Message(channel=channel, ts=ts, user=user, text=text, thread_ts=thread_ts))

    # HTTP ----------------------------------------------------------------------------------

    async def _api(self, request: Request) -> Response:
        method = request.path_params["method"]
        args = await read_args(request)
        auth = request.headers.get("authorization", "")
        fault = self.take_fault(method)
        token = bearer(auth, args)
        call = Call(
            method=method,
            args=args,
            at=self.clock(),
            verb=request.method,
            team=self.oauth.team_of(token),
        )
        self.calls.append(call)
        if method == ACCESS:
            unknown = sorted(set(args) - (sdk_arguments(method) or frozenset()))
            call.response = (
                {"ok": False, "error": "invalid_arguments"}
                if unknown
                else self.oauth.access(args, auth)
            )
            return JSONResponse(call.response)
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
            await self._stopping.wait()
            return Response("the stand-in stopped", status_code=503)
        if fault is not None and fault.kind == "server_error":
            if fault.applied:
                self._dispatch(method, args)
            call.status = 500
            return Response("internal error", status_code=500)
        if method == "apps.connections.open" or auth.startswith("Bearer xapp-"):
            call.response = self._app_level(method, auth.removeprefix("Bearer "))
        elif not auth.startswith("Bearer xox") and "token" not in args:
            call.response = {"ok": False, "error": "not_authed"}
        elif (refused := self.oauth.refusal(token, args)) is not None:
            call.response = refused
        elif fault is not None:
            call.response = self._fault_answer(fault.kind, args)
        else:
            with self.oauth.acting_for(self, token):
                call.response = self._dispatch(method, args)
                if method == "auth.test" and call.response.get("ok"):
                    call.response.update(self.oauth.auth_test_extra(token))
        return JSONResponse(call.response)

    def _dispatch(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        handler = self._methods.get(method)
        accepted = sdk_arguments(method)
        if handler is None or accepted is None:
            return {"ok": False, "error": "unknown_method"}
        unknown = sorted(set(args) - accepted - TRANSPORT_ARGS)
        if unknown:
            return {
                "ok": False,
                "error": "invalid_arguments",
                "response_metadata": {"messages": [f"[ERROR] unknown argument: {unknown[0]}"]},
            }
        return handler(args)

    def _app_level(self, method: str, token: str) -> dict[str, Any]:
        """`apps.connections.open` takes the app-level token and nothing else takes it
        (https://docs.slack.dev/reference/methods/apps.connections.open); an app without
        Socket Mode has no app-level token to accept."""
        if method != "apps.connections.open" or token.startswith("xox"):
            return {"ok": False, "error": "not_allowed_token_type"}
        if not token:
            return {"ok": False, "error": "not_authed"}
        if self.socket_mode is None:
            return {"ok": False, "error": "invalid_auth"}
        return self.socket_mode.connections_open(token)

    def _fault_answer(self, kind: str, args: dict[str, Any]) -> dict[str, Any]:
        if kind == "not_in_streaming_state":
            message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
            if message is not None:
                message.streaming = False
            return {"ok": False, "error": STREAM_ERROR}
        return {"ok": False, "error": kind.removeprefix("error:")}

    async def _response_url(self, request: Request) -> Response:
        body = await read_args(request)
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
                text=str(args.get("markdown_text") or args.get("text") or ""),
                blocks=args.get("blocks"),
                metadata=args.get("metadata"),
                **extra,
            )
        )

    def _post_message(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        if args.get("markdown_text") and (args.get("text") or args.get("blocks")):
            return {"ok": False, "error": "markdown_text_conflict"}
        if not (args.get("text") or args.get("blocks") or args.get("markdown_text")):
            return {"ok": False, "error": "no_text"}
        if args.get("blocks") and (problem := blocks_problem(args["blocks"])):
            return _invalid_blocks(problem)
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
        if args.get("markdown_text") and (args.get("text") or args.get("blocks")):
            return {"ok": False, "error": "markdown_text_conflict"}
        if not (args.get("text") or args.get("blocks") or args.get("markdown_text")):
            return {"ok": False, "error": "no_text"}
        if args.get("blocks") and (problem := blocks_problem(args["blocks"])):
            return _invalid_blocks(problem)
        if args.get("markdown_text"):
            # Markdown replaces what the message shows: its blocks and any streamed content.
            message.text, message.blocks, message.fallback = str(args["markdown_text"]), None, None
            message.tasks, message.streamed = {}, False
        elif "blocks" in args:
            blocks = args["blocks"]
            message.blocks = blocks or None
            message.text, message.fallback = str(args.get("text") or ""), None
            message.tasks, message.streamed = tasks_shown(blocks), False
        elif message.blocks or message.streamed:
            # Slack keeps the blocks (and the streamed content) when `blocks` is left out:
            # `text` alone only changes the notification text, nothing a person sees.
            message.fallback = str(args["text"])
        else:
            message.text = str(args["text"])
        if "metadata" in args:
            message.metadata = args["metadata"]
        message.edited += 1
        return {"ok": True, "channel": message.channel, "ts": message.ts, "text": message.text}

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.bot_id != self.bot_id:
            return {"ok": False, "error": "cant_delete_message"}
        message.deleted = True
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _post_ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("user"):
            return {"ok": False, "error": "user_not_in_channel"}
        self.ephemerals.append(dict(args))
        return {"ok": True, "message_ts": self.next_ts()}

    def _start_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = str(args.get("channel") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not args.get("thread_ts"):
            return {"ok": False, "error": "invalid_arguments"}
        if not channel.startswith("D") and not (
            args.get("recipient_user_id") and args.get("recipient_team_id")
        ):
            # "Required when streaming to channels" (chat.startStream's documented arguments).
            return {"ok": False, "error": "invalid_arguments"}
        message = self._bot_message(
            {**args, "text": "", "markdown_text": ""},
            streaming=True,
            streamed=True,
            stream_started=self.clock(),
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
        if not (args.get("markdown_text") or args.get("chunks")):
            # Nothing to append: the documented method requires content (`markdown_text` is a
            # required argument; chunks stand in for it).
            return {"ok": False, "error": "invalid_arguments"}
        self._apply_stream(message, args)
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _stop_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        message = self.find(str(args.get("channel", "")), str(args.get("ts", "")))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if self.stream_expired(message):
            message.streaming = False
            return {"ok": False, "error": STREAM_ERROR}
        if args.get("blocks") and (problem := blocks_problem(args["blocks"])):
            return _invalid_blocks(problem)
        refused = self.stream_session_status(
            message.channel, message.thread_ts, args.get("session_status")
        )
        if refused is not None:
            return {
                "ok": False,
                "error": "invalid_arguments",
                "response_metadata": {"messages": [refused]},
            }
        self._apply_stream(message, args)
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
        """Assistant threads (DMs) need `assistant:write`; channel threads take it with
        `chat:write`, which the bot has."""
        channel = str(args.get("channel_id", ""))
        if not args.get("thread_ts") or "status" not in args:
            return {"ok": False, "error": "invalid_arguments"}
        if not channel.startswith(self.status_channels):
            return {"ok": False, "error": "not_allowed"}
        refused = self._thread_status(args)
        if refused is not None:
            return refused
        self.statuses.append(dict(args))
        return {"ok": True}

    def _replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """Oldest first, the parent included, in pages; `oldest` / `latest` bound the ts."""
        channel, ts = str(args.get("channel", "")), str(args.get("ts", ""))
        found = self.thread(channel, ts)
        if not found and not self.messages.get(channel):
            return {"ok": False, "error": "thread_not_found"}
        return self._page(found, args)

    def _history(self, args: dict[str, Any]) -> dict[str, Any]:
        """Newest first, top-level messages only, in pages."""
        channel = str(args.get("channel", ""))
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        return self._page(list(reversed(self.top_level(channel))), args)

    def _page(self, ordered: list[Message], args: dict[str, Any]) -> dict[str, Any]:
        return page_of(ordered, args, page_size=self.page_size)


def _invalid_blocks(why: str) -> dict[str, Any]:
    return {"ok": False, "error": "invalid_blocks", "response_metadata": {"messages": [why]}}
