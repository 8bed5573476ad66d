"""The console's login session: a signed cookie, its CSRF token, and the same-origin check.

The cookie (`console_session`, HttpOnly, SameSite=Strict, Path=/console, Secure over https)
holds `v1.<operator id>.<expiry>.<signature>`: the operator's id is a digest of its token (never
the token), the signature an HMAC keyed by a secret derived from every token
(`ConsoleTokens.signing_key`), so every web process accepts every other's cookies without shared
state; removing a token from `CONSOLE_TOKENS`, or changing any, ends those sessions. A logout
clears the cookie in that browser; a copied cookie stays valid until it expires
(`SESSION_SECONDS`), which is the cost of keeping no server-side session table.

Every POST under `/console/api/` and the logout need the CSRF token `/console/api/me` returns,
in `X-Console-CSRF` (an HMAC of the cookie: another site can neither read it nor make a
browser send a custom header cross-origin), and, when the browser sends an `Origin` (or, lacking
it, a `Referer`), one of this host.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.requests import Request

from bot.console.tokens import ConsoleTokens, Operator

COOKIE = "console_session"
CSRF_HEADER = "x-console-csrf"
SESSION_SECONDS = 12 * 3600
_VERSION = "v1"


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def session_cookie(
    tokens: ConsoleTokens, operator: Operator, clock: Callable[[], float] = time.time
) -> str:
    expires = int(clock()) + SESSION_SECONDS
    body = f"{_VERSION}.{operator.id}.{expires}"
    return f"{body}.{_sign(tokens.signing_key, body)}"


def operator_of(
    tokens: ConsoleTokens, cookie: str | None, clock: Callable[[], float] = time.time
) -> Operator | None:
    """The operator a cookie is for, or None (absent, forged, expired, or its token gone)."""
    if not cookie or len(cookie) > 256:
        return None
    parts = cookie.split(".")
    if len(parts) != 4 or parts[0] != _VERSION or not parts[2].isdigit():
        return None
    body = ".".join(parts[:3])
    if not hmac.compare_digest(_sign(tokens.signing_key, body), parts[3]):
        return None
    if int(parts[2]) < clock():
        return None
    return tokens.by_id(parts[1])


def csrf_token(tokens: ConsoleTokens, cookie: str) -> str:
    return _sign(tokens.signing_key, f"csrf:{cookie}")[:40]


def csrf_ok(tokens: ConsoleTokens, request: Request) -> bool:
    """The request carries the session's CSRF token and, if it names one, this origin."""
    cookie = request.cookies.get(COOKIE)
    presented = request.headers.get(CSRF_HEADER)
    if not cookie or not presented:
        return False
    if not hmac.compare_digest(csrf_token(tokens, cookie), presented):
        return False
    return same_origin(request)


def same_origin(request: Request) -> bool:
    """An `Origin` (else a `Referer`) naming this host, or neither (a non-browser client)."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is not None:
        return origin != "null" and urlsplit(origin).netloc == host
    referer = request.headers.get("referer")
    if referer is not None:
        return urlsplit(referer).netloc == host
    return True


def is_https(request: Request) -> bool:
    forwarded = request.headers.get("x-forwarded-proto", "")
    return request.url.scheme == "https" or forwarded.split(",")[0].strip() == "https"
