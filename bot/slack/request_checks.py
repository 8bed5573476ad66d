"""What `/slack/events` checks about a request before anything reads it as Slack's.

Slack retries every 5xx, so input that crashes the handler crashes it again on each retry; these
checks turn it into a 4xx instead. slack_sdk's `SignatureVerifier.is_valid` assumes its inputs
are well formed (it calls `int()` on the timestamp, `hmac.compare_digest` refuses a signature
with a non-ASCII character, and it decodes the body as UTF-8), and Bolt's `parse_body` lets
`json.loads` raise, `RecursionError` included. So:

- `headers_well_formed`: false → 401, decided from the headers alone, before the body is read;
- `utf8`: None → 400 (the signature is over bytes that are not text: nothing Slack sends);
- `parse_payload`: None → 400, for a signed body that is not a JSON object;
- `bolt_request_of`: None → 200 that does nothing (a payload Bolt cannot read its ids from).

`refused` and `malformed` are those 401 and 400 answers.
"""

from __future__ import annotations

import re
from typing import Any

from slack_bolt.async_app import AsyncBoltRequest
from slack_bolt.request.internals import parse_body
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

_TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""Whole seconds since the epoch, as Slack sends them (ASCII digits only: `int()` would also
take `"١٢٣"`, an underscore or thousands of digits, none of which is a time)."""
_SIGNATURE = re.compile(r"v0=[0-9a-f]{64}")
"""Slack's only signature scheme: a lowercase hex HMAC-SHA256 (what the verifier computes)."""


def headers_well_formed(timestamp: str | None, signature: str | None) -> bool:
    return bool(
        timestamp
        and signature
        and _TIMESTAMP.fullmatch(timestamp)
        and _SIGNATURE.fullmatch(signature)
    )


def utf8(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def media_type(content_type: str | None) -> str | None:
    """The content type as Bolt compares it (parameters such as `charset` cut off), so this
    parse and Bolt's agree on which bodies are JSON."""
    return content_type.split(";")[0] if content_type else None


def parse_payload(text: str, content_type: str | None) -> dict[str, Any] | None:
    """The body parsed as Bolt will parse it, or None if it is not a JSON object (not JSON at
    all, a form whose `payload` is not JSON, or JSON nested past the recursion limit)."""
    try:
        parsed = parse_body(text, media_type(content_type))
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def bolt_request_of(request: Request, text: str) -> AsyncBoltRequest | None:
    """The request as Bolt's Starlette adapter builds it, or None where building it fails.

    Building it only parses the body and pulls the team, user and channel ids out of it, in
    code that takes each field's type for granted (`"id" in team`, `authorizations[0]`); so
    an exception here means a payload of the wrong shape, never an outage.
    """
    try:
        return AsyncBoltRequest(
            body=text,
            query=request.query_params,  # type: ignore[arg-type]
            headers=request.headers,  # type: ignore[arg-type]
        )
    except Exception:
        return None


def refused() -> Response:
    return JSONResponse({"error": "invalid signature or stale timestamp"}, status_code=401)


def malformed() -> Response:
    return JSONResponse({"error": "malformed body"}, status_code=400)
