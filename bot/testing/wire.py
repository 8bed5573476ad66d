"""How a Web API call reaches the stand-in: its arguments read from a query string, a form or
JSON as Slack takes them, and the argument names the installed SDK declares for each method (what
the stand-in accepts, so an argument Slack would silently ignore is refused instead)."""

from __future__ import annotations

import functools
import inspect
import json
from typing import Any
from urllib.parse import parse_qsl

from slack_sdk.web.async_client import AsyncWebClient
from starlette.requests import Request

JSON_FIELDS = ("blocks", "metadata", "chunks", "attachments", "view", "prompts", "loading_messages")
TRANSPORT_ARGS = frozenset({"token", "team_id"})
"""Sent by the SDK beside a method's own arguments: the token (also in the header) and the
client's `default_params` (`team_id`, which Bolt sets on the clients it hands to listeners)."""


@functools.cache
def sdk_arguments(method: str) -> frozenset[str] | None:
    """The argument names the installed SDK's method for `method` declares (None: no such
    method): what Slack documents for it, read from the client the bot itself uses."""
    function = getattr(AsyncWebClient, method.replace(".", "_"), None)
    if function is None:
        return None
    parameters = inspect.signature(function).parameters.values()
    return frozenset(p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY)


async def read_args(request: Request) -> dict[str, Any]:
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
