"""Reading a request body: bounded, strict JSON, then a pydantic model.

Read only after the caller is authenticated, and at most `limit` bytes (413 past it, without
reading the rest), so no one can make the process hold an arbitrary body. Bad input is a 4xx,
never a 5xx: bytes that are not UTF-8, text that is not JSON (`NaN` included, which JSON does
not have), JSON nested past the parser's recursion limit are a 400; a JSON value of the wrong
shape is a 422 naming the field. Half a surrogate pair (a lone `\\ud800` escape), which no
database or model takes, is replaced with U+FFFD wherever it appears, as Slack text is.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from bot.api.errors import ApiError, invalid_body
from bot.slack.inbound import clean_text

M = TypeVar("M", bound=BaseModel)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_clean(item) for item in value]
    if isinstance(value, dict):
        return {clean_text(key): _clean(item) for key, item in value.items()}
    return value


async def read_json(request: Request, limit: int, *, empty: Any = None) -> Any:
    """The body as JSON; `empty` for a body with no bytes (when the body is optional), else 400."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, f"the body is larger than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, f"the body is larger than {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ApiError(400, "the body was cut off") from None
    raw = b"".join(chunks)
    if not raw.strip():
        if empty is not None:
            return empty
        raise ApiError(400, "a JSON body is required")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "the body is not UTF-8") from None
    try:
        parsed = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise ApiError(400, "the body is not JSON") from None
    try:
        return _clean(parsed)
    except RecursionError:
        raise ApiError(400, "the body is nested too deeply") from None


async def read_body(request: Request, model: type[M], limit: int, *, optional: bool = False) -> M:
    data = await read_json(request, limit, empty={} if optional else None)
    if not isinstance(data, dict):
        raise ApiError(422, "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise invalid_body(err) from None
