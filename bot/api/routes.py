"""The HTTP turn API's routes: HTTP in, `ApiService` calls, HTTP out.

Every route but `/openapi.json` authenticates first (401 before anything is read), then checks
what the path, query and headers say (400), then reads the body (400 / 413 / 422), then asks the
engine. While the API is off (no `API_TOKENS`) every route answers 404, as an unknown path does;
a wrong method is a 405 in the same JSON shape (`errors.routing_error`, for the whole app).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bot.api.auth import Caller
from bot.api.bodies import read_body
from bot.api.errors import ApiError, engine_error, response
from bot.api.schemas import MAX_ID_CHARS, CancelBody, ConfirmBody, ResumeBody, TurnBody
from bot.api.service import ApiService

log = logging.getLogger(__name__)

ServiceOf = Callable[[Request], ApiService | None]
Handler = Callable[[ApiService, Caller, Request], Awaitable[Response]]

MAX_BODY_BYTES = 1024 * 1024
"""A turn's text is bounded by `MAX_INBOUND_CHARS` (40,000 characters by default, at most four
bytes each); a body past this is refused before it is read in full."""
MAX_EVENTS = 1000
MAX_CONFIRMATIONS, DEFAULT_CONFIRMATIONS = 500, 100
_SEQ = re.compile(r"[0-9]{1,18}")
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def _not_found() -> Response:
    return JSONResponse({"error": "not found"}, status_code=404)


def _endpoint(service_of: ServiceOf, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    async def run(request: Request) -> Response:
        service = service_of(request)
        if service is None:
            return _not_found()
        try:
            caller = service.authenticate(request.headers.get("authorization"))
            return await handler(service, caller, request)
        except ApiError as err:
            return response(err)
        except Exception as err:
            mapped = engine_error(err)
            if mapped is not None:
                return response(mapped)
            log.exception("an API request failed", extra={"route": request.url.path})
            return response(ApiError(500, "internal error; nothing may have been applied"))

    return run


def _seq(value: str | None, what: str) -> int | None:
    if value is None:
        return None
    if not _SEQ.fullmatch(value.strip()):
        raise ApiError(400, f"{what} must be a non-negative integer (an event seq)")
    return int(value)


def _after(request: Request) -> int:
    """Where a read starts: `Last-Event-ID` (a reconnecting client's), else `?after=`, else 0."""
    header = _seq(request.headers.get("last-event-id"), "Last-Event-ID")
    if header is not None:
        return header
    query = _seq(request.query_params.get("after"), "after")
    return query or 0


def _bounded(request: Request, name: str, low: float, high: float, default: float) -> float:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be a number from {low:g} to {high:g}") from None
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be a number from {low:g} to {high:g}")
    return value


def _wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


def _json(model: BaseModel, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return JSONResponse(model.model_dump(mode="json"), status_code=status, headers=headers)


# -- handlers ------------------------------------------------------------------------------------


async def post_turn(service: ApiService, caller: Caller, request: Request) -> Response:
    where = service.address(caller, request.path_params["key"])
    streaming = _wants_stream(request)
    after = _after(request) if streaming else 0
    wait = _bounded(request, "wait", 0, service.settings.wait, service.settings.wait)
    body = await read_body(request, TurnBody, MAX_BODY_BYTES)
    if streaming:
        # Listening before the turn starts: its first deltas come live too.
        feed = service.feed(where, after)
        await feed.open()
        try:
            turn_id = await service.start(where, body, request.headers.get("idempotency-key"))
        except BaseException:
            feed.close()
            raise
        frames = service.turn_stream(where, turn_id, feed)
        return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)
    turn_id = await service.start(where, body, request.headers.get("idempotency-key"))
    result = await service.wait(where, turn_id, wait)
    out = service.turn_out(where, result)
    if result.status.finished or result.status.value == "suspended":
        return _json(out)
    return _json(out, 202, {"Location": out.poll})


async def get_turn(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    return _json(service.turn_out(where, await service.turn(where, request.path_params["turn_id"])))


async def get_events(service: ApiService, caller: Caller, request: Request) -> Response:
    # Any session of the caller's team, with or without a turn yet: a client subscribes first
    # and misses nothing of the first turn (another team's key is another session, so this
    # reveals nothing either).
    where = service.address(caller, request.path_params["key"])
    after = _after(request)
    if _wants_stream(request):
        frames = service.event_stream(where, after)
        return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)
    limit = int(_bounded(request, "limit", 1, MAX_EVENTS, MAX_EVENTS))
    return _json(await service.events(where, after, limit))


async def get_pending(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    return _json(await service.pending(where))


async def get_confirmations(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    limit = int(_bounded(request, "limit", 1, MAX_CONFIRMATIONS, DEFAULT_CONFIRMATIONS))
    return _json(await service.confirmations(where, limit))


async def post_resume(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    body = await read_body(request, ResumeBody, MAX_BODY_BYTES)
    out = await service.resume(where, body)
    return _json(out, 202, {"Location": out.poll})


async def post_confirmation(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    body = await read_body(request, ConfirmBody, MAX_BODY_BYTES)
    out = await service.confirm(where, request.path_params["confirmation_id"], body)
    return _json(out, 202, {"Location": out.poll})


async def post_cancel(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    body = await read_body(request, CancelBody, MAX_BODY_BYTES, optional=True)
    return _json(await service.cancel(where, body))


async def post_reset(service: ApiService, caller: Caller, request: Request) -> Response:
    where = await service.existing(caller, request.path_params["key"])
    out, applied = await service.reset(where)
    return _json(out, 200 if applied else 202)


async def get_grants(service: ApiService, caller: Caller, request: Request) -> Response:
    return _json(await service.grants(caller))


async def delete_grant(service: ApiService, caller: Caller, request: Request) -> Response:
    grant_id = request.path_params["grant_id"]
    if not 0 < len(grant_id) <= MAX_ID_CHARS:
        raise ApiError(400, f"a grant id is 1-{MAX_ID_CHARS} characters")
    return _json(await service.revoke_grant(caller, grant_id))


ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/sessions/{key}/turns", post_turn),
    ("GET", "/sessions/{key}/turns/{turn_id}", get_turn),
    ("GET", "/sessions/{key}/events", get_events),
    ("GET", "/sessions/{key}/pending", get_pending),
    ("GET", "/sessions/{key}/confirmations", get_confirmations),
    ("POST", "/sessions/{key}/resume", post_resume),
    ("POST", "/sessions/{key}/confirmations/{confirmation_id}", post_confirmation),
    ("POST", "/sessions/{key}/cancel", post_cancel),
    ("POST", "/sessions/{key}/reset", post_reset),
    ("GET", "/grants", get_grants),
    ("DELETE", "/grants/{grant_id}", delete_grant),
]


def api_routes(service_of: ServiceOf) -> list[Route]:
    """The API's routes, for the app that serves Slack's; `service_of` finds the running
    `ApiService` (None while the API is off)."""
    from bot.api.openapi import description

    served = description()  # built now, not on the loop at the first request (tens of ms)

    async def openapi(request: Request) -> Response:
        if service_of(request) is None:
            return _not_found()
        return JSONResponse(served)

    routes = [
        Route(path, _endpoint(service_of, handler), methods=[method])
        for method, path, handler in ROUTES
    ]
    return [Route("/openapi.json", openapi, methods=["GET"]), *routes]
