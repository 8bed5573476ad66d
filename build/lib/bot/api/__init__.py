"""The HTTP turn API: the engine's sessions over HTTP, beside Slack, for other surfaces (a web
client, another chat tool, a test harness) and for operators. See docs/http-api.md.

`routes` (HTTP) → `service` (engine calls) → `feed` / `sse` (the event log, then live);
`auth` (bearer tokens → principals), `keys` (tenancy), `bodies` / `schemas` / `errors` (what
goes in and out), `openapi` (the description served at `/openapi.json`).
"""

from bot.api.auth import Caller, TokenError, TokenTable, parse_tokens
from bot.api.routes import api_routes
from bot.api.service import ApiService, ApiSettings

__all__ = [
    "ApiService",
    "ApiSettings",
    "Caller",
    "TokenError",
    "TokenTable",
    "api_routes",
    "parse_tokens",
]
