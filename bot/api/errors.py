"""How the API says no: one JSON shape (`{"error": ..., "detail": [...]}`) and one mapping from
the engine's errors to status codes, so every route answers a refusal alike.

    ApiError(status)                 the API's own refusals: 400, 401, 403, 404, 409, 413, 422
    ResumeAuthorizationError   403   not this person's to answer (or another workspace)
    StopAuthorizationError     403   not this person's to stop (cancel)
    ResumeConflictError        409   not pending, another turn or input, a stale digest, expired
    SessionSuspendedError      409   the session waits on an answer; no new turn until then
    ResumeValidationError      422   the answer does not fit the request's schema (or a grant
                                     `allow_again` asks for that the engine will not issue, or
                                     `edits` it refuses, each field in `detail`)
    TurnNotFoundError          404
    GrantNotFoundError         404   no such standing grant (or another workspace's)
    StoreUnavailableError      503   the database is away; nothing was applied, retry
    anything else              500   logged; the text never reaches the caller

No answer repeats what the request held (a body, a token); validation errors name the field
and the rule, not the value. Refusals speak to the person behind the token ("this request was
already answered", "you can't answer this request: only the person it asks can answer it") and
never show the engine's internal session keys.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agent import (
    EditRejected,
    GrantNotFoundError,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeValidationError,
    SessionSuspendedError,
    StopAuthorizationError,
    StoreUnavailableError,
    TurnNotFoundError,
)

WAITING = (
    "this conversation is waiting for an answer to a request; answer it (GET pending) or "
    "cancel it before starting another turn"
)
HOOK_FAILED = "the answer's authorization hook failed; nothing was applied (retry later)"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        headers: dict[str, str] | None = None,
        detail: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers
        self.detail = detail


def unauthorized(why: str, *, invalid: bool) -> ApiError:
    challenge = 'Bearer realm="api"' + (', error="invalid_token"' if invalid else "")
    return ApiError(401, why, headers={"WWW-Authenticate": challenge})


def invalid_body(err: ValidationError) -> ApiError:
    detail = [
        {"loc": [p if isinstance(p, int) else str(p) for p in e["loc"]], "msg": e["msg"]}
        for e in err.errors(include_input=False, include_url=False, include_context=False)
    ]
    return ApiError(422, "the body does not fit the request's schema", detail=detail)


def engine_error(err: Exception) -> ApiError | None:
    """The status an engine error carries, or None for one that is a server fault."""
    match err:
        case ResumeAuthorizationError():
            return ApiError(403, f"you can't answer this request: {err}")
        case StopAuthorizationError():
            return ApiError(403, f"you can't stop this: {err}")
        case ResumeConflictError():
            return ApiError(409, str(err))
        case SessionSuspendedError():
            # The store's text names the session's internal key; this is what a caller needs.
            return ApiError(409, WAITING)
        case EditRejected():
            detail = [{"loc": ["body", "edits", k], "msg": v} for k, v in err.fields.items()]
            return ApiError(422, str(err), detail=detail)
        case ResumeValidationError():
            return ApiError(422, str(err))
        case TurnNotFoundError():
            return ApiError(404, "no such turn on this session")
        case GrantNotFoundError():
            return ApiError(404, "no such standing grant")
        case StoreUnavailableError():
            return ApiError(
                503,
                "the database is unavailable; nothing was applied, retry",
                headers={"Retry-After": "2"},
            )
        case _:
            return None


ROUTING = {404: "not found", 405: "method not allowed"}


async def routing_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (an unknown path, a wrong method) in the JSON shape every other
    answer has, with their headers (`Allow` for a 405); registered for the whole app."""
    assert isinstance(exc, HTTPException)
    message = ROUTING.get(exc.status_code, exc.detail)
    return JSONResponse({"error": message}, status_code=exc.status_code, headers=exc.headers)


def response(err: ApiError) -> JSONResponse:
    body: dict[str, Any] = {"error": err.message}
    if err.detail is not None:
        body["detail"] = err.detail
    return JSONResponse(body, status_code=err.status, headers=err.headers)
