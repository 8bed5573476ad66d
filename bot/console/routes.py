"""The operator console's HTTP routes (`/console`), and the contract the page is written to.

Contract (every path under /console; JSON unless said; times are epoch seconds)
- Off unless `CONSOLE_TOKENS` holds at least one token: every /console path answers 404.
- `GET /console`: the page (text/html) with `Content-Security-Policy: default-src 'self';
  script-src 'nonce-N'; style-src 'nonce-N'; frame-ancestors 'none'; ...` (the server puts
  `nonce="N"` on the page's `<script>` and `<style>` tags, or replaces `__CSP_NONCE__`), plus
  `X-Content-Type-Options: nosniff`, `Referrer-Policy: same-origin`, `Cache-Control: no-store`
  (on every console answer). The page shows its login form when `GET /console/api/me` is 401.
- `POST /console/login`, form (or JSON) field `token` → 303 to /console with the cookie
  `console_session` (HttpOnly, SameSite=Strict, Path=/console, Secure over https; a signed
  operator id and expiry, never the token; `bot.console.auth`). A wrong token → 401: JSON
  `{"error": "wrong token"}` for a JSON client, else a small page that sends the browser on to
  `/console?error=1` (the page says the token was refused). Both audited (`login`,
  `login.failed`; never the token).
- `POST /console/logout` (CSRF-checked as below) → 303 to /console, cookie cleared; audited.
- Every `/console/api/*` needs the cookie: else 401 `{"error": "login"}`. Every POST needs
  `X-Console-CSRF: <csrf from /api/me>` and, when the browser sends one, an `Origin` (else
  `Referer`) of this host: else 403 `{"error": "csrf"}`. Errors are `{"error": "<message>"}`.
- `GET /console/api/me` → `{"name", "teams": [..] | null, "csrf"}`.
- `GET /console/api/sessions?q=&status=&limit=50&before=` → `{"sessions": [{"key", "status",
  "team", "channel", "thread_ts", "updated_at", "turns", "last_turn_id", "last_speaker",
  "slack_url"}], "next": cursor | null}` (pass `next` as `before` for the next page); `q`
  matches the key (channel), a turn id or a speaker (`<team>:<user>`); newest change first.
- `GET /console/api/sessions/{key}` (key URL-encoded) → `{"session": {...as listed...},
  "turns": [{"turn_id", "kind", "status", "speaker", "created_at", "finished_at",
  "cancel_reason", "steps": [{"step_id", "kind": "model"|"tool"|"input"|"other", "name",
  "at", "duration_ms", "tokens": {"input", "output", "cache_read", "cache_write"} | null,
  "stop_reason", "arguments", "result", "result_truncated", "error", "text"}], "events":
  [{"seq", "type", "at", "summary"}]}], "receipts": [{"session", "key", "tool", "status",
  "created_at", "updated_at", "fingerprint"}], "waiting": [...as /api/waiting...]}`. The
  latest 50 turns. Arguments, results, errors, texts and summaries are scrubbed of secrets;
  results past 4 KB are cut (`result_truncated`). 404 for a session the operator may not see.
- `GET /console/api/sessions/{key}/events` → text/event-stream: `id: <seq>`, `event: <type>`,
  `data: {"seq", "type", "turn_id", "summary"}` for each durable event after `Last-Event-ID`
  (header) or `?after=` (default 0: the whole log), then live; `: ping` when idle; a last
  `event: closing` when the server stops (reconnect with Last-Event-ID).
- `GET /console/api/waiting` → `{"items": [{"session", "turn_id", "request_id", "kind":
  "input"|"approval", "tool", "summary", "since", "age_s", "expires_at", "asked_by",
  "answerers" (text, as `bot approvals` prints it), "slack_url"}]}`.
- `GET /console/api/receipts?status=uncertain` → `{"receipts": [{"session", "key", "tool",
  "status", "created_at", "updated_at", "fingerprint"}]}` (no status: every receipt).
- `POST /console/api/receipts/resolve` `{"session", "key", "outcome": "completed"|"failed",
  "note"}` → `{"ok": true}`; 409 when the receipt is not uncertain (any more); 404 unknown.
- `GET /console/api/stuck?older_than=600` → `{"turns": [{"session", "turn_id", "status",
  "created_at", "age_s", "lease_owner", "reasons": [{"code", "detail"}]}]}` (`bot turns
  --stuck`, `older_than` its `--queued-for`), less the turns already asked to stop (their
  `cancel_reason` is set; the worker that takes their session up ends them).
- `POST /console/api/turns/cancel` `{"session", "turn_id", "reason"}` → `{"ok": true,
  "cancelled": [turn ids]}` (`bot cancel --turn`); 409 when it has already ended.
- `GET /console/api/daily?days=14` → `{"days": [{"day": "YYYY-MM-DD", "turns", "failed",
  "input_tokens", "output_tokens"}]}`: UTC days, oldest first, empty days as zeros.
- `GET /console/api/audit?limit=100` → `{"entries": [{"at", "who", "action", "target",
  "detail"}]}`, newest first.
Operators with `teams` see only those workspaces' sessions, everywhere above.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

from agent import StoreUnavailableError
from bot.console import auth
from bot.console.service import ConsoleError, ConsoleService
from bot.console.stream import event_frames
from bot.console.tokens import Operator

log = logging.getLogger(__name__)

ServiceOf = Callable[[Request], ConsoleService | None]
Handler = Callable[[ConsoleService, Operator, Request], Awaitable[Response]]

MAX_BODY_BYTES = 64 * 1024
NONCE_PLACEHOLDER = "__CSP_NONCE__"
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    # Not `no-referrer`: under it a browser sends `Origin: null` with the page's own POSTs,
    # which the origin check must refuse. `same-origin` still sends nothing to another site.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
API_CSP = "default-src 'none'; frame-ancestors 'none'"
_SEQ = re.compile(r"[0-9]{1,18}")
_FAILED_LOGIN_PAGE = (
    '<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" '
    'content="0;url=/console?error=1"><title>Console</title>'
    '<p>That token was not accepted. <a href="/console?error=1">Try again</a>.</p>'
)


def _headers(csp: str = API_CSP) -> dict[str, str]:
    return {**SECURITY_HEADERS, "Content-Security-Policy": csp}


def _json(data: Any, status: int = 200) -> Response:
    return JSONResponse(data, status_code=status, headers=_headers())


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


def _page_text() -> str | None:
    try:
        return resources.files("bot.console").joinpath("page.html").read_text(encoding="utf-8")
    except (FileNotFoundError, OSError):
        return None


def page_response() -> Response:
    """The page with a fresh CSP nonce on its inline `<script>` and `<style>` tags."""
    text = _page_text()
    if text is None:
        return _error(404, "the console page is not installed")
    nonce = secrets.token_urlsafe(18)
    if NONCE_PLACEHOLDER in text:
        text = text.replace(NONCE_PLACEHOLDER, nonce)
    else:
        text = text.replace("<script>", f'<script nonce="{nonce}">')
        text = text.replace("<style>", f'<style nonce="{nonce}">')
    csp = (
        f"default-src 'self'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
        "img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
        "object-src 'none'; frame-ancestors 'none'"
    )
    return HTMLResponse(text, headers=_headers(csp))


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ConsoleError(413, "the body is too large")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        form = parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
        return {name: values[0] for name, values in form.items()}
    if not raw.strip():
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        raise ConsoleError(400, "the body must be JSON") from None
    if not isinstance(data, dict):
        raise ConsoleError(400, "the body must be a JSON object")
    return data


def _text(body: dict[str, Any], name: str, *, required: bool = True, limit: int = 512) -> str:
    value = body.get(name, "")
    if not isinstance(value, str) or len(value) > limit or (required and not value):
        raise ConsoleError(400, f"{name} must be a string of 1-{limit} characters")
    return value


def _number(request: Request, name: str, low: float, high: float, default: float) -> float:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConsoleError(400, f"{name} must be a number from {low:g} to {high:g}") from None
    if not low <= value <= high:
        raise ConsoleError(400, f"{name} must be a number from {low:g} to {high:g}")
    return value


def encode_cursor(cursor: tuple[float, str] | None) -> str | None:
    if cursor is None:
        return None
    return base64.urlsafe_b64encode(json.dumps(list(cursor)).encode()).decode()


def decode_cursor(raw: str | None) -> tuple[float, str] | None:
    if not raw:
        return None
    try:
        at, key = json.loads(base64.urlsafe_b64decode(raw.encode()))
        return float(at), str(key)
    except (ValueError, TypeError):
        raise ConsoleError(400, "before must be a cursor this API returned") from None


def _after(request: Request) -> int:
    for raw in (request.headers.get("last-event-id"), request.query_params.get("after")):
        if raw is not None:
            if not _SEQ.fullmatch(raw.strip()):
                raise ConsoleError(400, "Last-Event-ID / after must be an event seq")
            return int(raw)
    return 0


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


# -- endpoints -----------------------------------------------------------------------------


def _guarded(
    service_of: ServiceOf, handler: Handler, *, csrf: bool
) -> Callable[[Request], Awaitable[Response]]:
    async def run(request: Request) -> Response:
        service = service_of(request)
        if service is None:
            return _error(404, "not found")
        operator = auth.operator_of(service.tokens, request.cookies.get(auth.COOKIE))
        if operator is None:
            return _error(401, "login")
        if csrf and not auth.csrf_ok(service.tokens, request):
            return _error(403, "csrf")
        try:
            return await handler(service, operator, request)
        except ConsoleError as err:
            return _error(err.status, err.message)
        except StoreUnavailableError:
            return _error(503, "the database cannot be reached; try again shortly")
        except Exception:
            log.exception("a console request failed", extra={"route": request.url.path})
            return _error(500, "internal error")

    return run


OpenHandler = Callable[[ConsoleService, Request], Awaitable[Response]]


def _open(service_of: ServiceOf, handler: OpenHandler) -> Callable[[Request], Awaitable[Response]]:
    """A route before login: the page, and the login itself (same-origin checked: no other
    site may sign a browser in)."""

    async def run(request: Request) -> Response:
        service = service_of(request)
        if service is None:
            return _error(404, "not found")
        try:
            return await handler(service, request)
        except ConsoleError as err:
            return _error(err.status, err.message)

    return run


async def page(service: ConsoleService, request: Request) -> Response:
    return page_response()


async def login(service: ConsoleService, request: Request) -> Response:
    if not auth.same_origin(request):
        return _error(403, "csrf")
    body = await _body(request)
    presented = body.get("token")
    operator = service.tokens.login(presented) if isinstance(presented, str) else None
    if operator is None:
        await service.audit("(unknown)", "login.failed", None, {"client": _client(request)})
        if "application/json" in request.headers.get("accept", "") or (
            request.headers.get("content-type", "").startswith("application/json")
        ):
            return _error(401, "wrong token")
        return HTMLResponse(_FAILED_LOGIN_PAGE, status_code=401, headers=_headers())
    cookie = auth.session_cookie(service.tokens, operator, service.clock)
    response = RedirectResponse("/console", status_code=303, headers=_headers())
    response.set_cookie(
        auth.COOKIE,
        cookie,
        max_age=auth.SESSION_SECONDS,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=auth.is_https(request),
    )
    await service.audit(operator.name, "login", None, {"client": _client(request)})
    return response


async def logout(service: ConsoleService, op: Operator, request: Request) -> Response:
    await service.audit(op.name, "logout")
    response = RedirectResponse("/console", status_code=303, headers=_headers())
    response.delete_cookie(
        auth.COOKIE,
        path="/console",
        httponly=True,
        samesite="strict",
        secure=auth.is_https(request),
    )
    return response


async def me(service: ConsoleService, op: Operator, request: Request) -> Response:
    cookie = request.cookies.get(auth.COOKIE, "")
    teams = None if op.teams is None else list(op.teams)
    return _json({"name": op.name, "teams": teams, "csrf": auth.csrf_token(service.tokens, cookie)})


async def sessions(service: ConsoleService, op: Operator, request: Request) -> Response:
    params = request.query_params
    q = params.get("q") or None
    status = params.get("status") or None
    if (q and len(q) > 200) or (status and len(status) > 32):
        raise ConsoleError(400, "q or status is too long")
    limit = int(_number(request, "limit", 1, 200, 50))
    found, cursor = await service.sessions(
        op, q=q, status=status, limit=limit, before=decode_cursor(params.get("before"))
    )
    return _json({"sessions": found, "next": encode_cursor(cursor)})


async def session(service: ConsoleService, op: Operator, request: Request) -> Response:
    return _json(await service.session(op, request.path_params["key"]))


async def events(service: ConsoleService, op: Operator, request: Request) -> Response:
    key = request.path_params["key"]
    after = _after(request)
    await service.require_session(op, key)
    return StreamingResponse(
        event_frames(service, key, after),
        media_type="text/event-stream",
        headers={**_headers(), "Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def waiting(service: ConsoleService, op: Operator, request: Request) -> Response:
    return _json({"items": await service.waiting(op)})


async def receipts(service: ConsoleService, op: Operator, request: Request) -> Response:
    status = request.query_params.get("status") or None
    return _json({"receipts": await service.receipts(op, status)})


async def resolve(service: ConsoleService, op: Operator, request: Request) -> Response:
    body = await _body(request)
    outcome = body.get("outcome")
    if outcome not in ("completed", "failed"):
        raise ConsoleError(400, "outcome must be completed or failed")
    note = _text(body, "note", required=False, limit=2000)
    await service.resolve(op, _text(body, "session"), _text(body, "key"), outcome, note)
    return _json({"ok": True})


async def stuck(service: ConsoleService, op: Operator, request: Request) -> Response:
    older_than = _number(request, "older_than", 0, 10_000_000, 600)
    return _json({"turns": await service.stuck(op, older_than)})


async def cancel(service: ConsoleService, op: Operator, request: Request) -> Response:
    body = await _body(request)
    reason = _text(body, "reason", required=False, limit=500)
    ended = await service.cancel(op, _text(body, "session"), _text(body, "turn_id"), reason)
    return _json({"ok": True, "cancelled": ended})


async def daily(service: ConsoleService, op: Operator, request: Request) -> Response:
    days = int(_number(request, "days", 1, 366, 14))
    return _json({"days": await service.daily(op, days)})


async def audit(service: ConsoleService, op: Operator, request: Request) -> Response:
    limit = int(_number(request, "limit", 1, 1000, 100))
    return _json({"entries": await service.audit_entries(op, limit)})


def console_routes(service_of: ServiceOf) -> list[Route]:
    """Every console route, registered whether the console is on or not (off: 404s)."""

    def get(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        return _guarded(service_of, handler, csrf=False)

    def post(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        return _guarded(service_of, handler, csrf=True)

    return [
        Route("/console", _open(service_of, page), methods=["GET"]),
        Route("/console/login", _open(service_of, login), methods=["POST"]),
        Route("/console/logout", post(logout), methods=["POST"]),
        Route("/console/api/me", get(me), methods=["GET"]),
        Route("/console/api/sessions", get(sessions), methods=["GET"]),
        Route("/console/api/sessions/{key}", get(session), methods=["GET"]),
        Route("/console/api/sessions/{key}/events", get(events), methods=["GET"]),
        Route("/console/api/waiting", get(waiting), methods=["GET"]),
        Route("/console/api/receipts", get(receipts), methods=["GET"]),
        Route("/console/api/receipts/resolve", post(resolve), methods=["POST"]),
        Route("/console/api/stuck", get(stuck), methods=["GET"]),
        Route("/console/api/turns/cancel", post(cancel), methods=["POST"]),
        Route("/console/api/daily", get(daily), methods=["GET"]),
        Route("/console/api/audit", get(audit), methods=["GET"]),
    ]
