"""A small server-sent-events reader for the tests: frames as the spec defines them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx

COMMENT = ":"


@dataclass(frozen=True)
class Frame:
    event: str
    data: dict[str, Any]
    id: int | None


async def frames(
    source: httpx.Response | AsyncIterator[str], comments: bool = False
) -> AsyncIterator[Frame]:
    """The frames of an event stream (a response, or its lines already being read); with
    `comments`, comment lines (`: ping`) too, as frames of event `:` holding the comment."""
    lines = source.aiter_lines() if isinstance(source, httpx.Response) else source
    event, data, ident = "message", [], None
    async for line in lines:
        if line == "":
            if data:
                yield Frame(event=event, data=json.loads("\n".join(data)), id=ident)
            event, data, ident = "message", [], None
        elif line.startswith(":"):
            if comments:
                yield Frame(event=COMMENT, data={"comment": line[1:].strip()}, id=None)
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                ident = int(value)
