"""The SDK's message stream, opened so that leaving it early leaves nothing behind.

`AsyncMessageStream.close()` closes the HTTP response but not the stream's async generators,
and the outermost one is in a reference cycle with the stream (it holds `self`, the stream holds
it). A stream read to its end has finished them; one left mid-reply (a stop, a newer message, a
cancelled turn) kept them suspended until a cyclic collection, whenever that ran: after its
event loop had closed, finalizing one raised "Event loop is closed" (an unraisable error naming
`Response.aiter_raw`), reported in whatever ran then. Closed here, on the loop that ran them,
the rest of the chain follows: each inner generator, no longer referenced, is finalized by the
loop's hook at once.

The generators are reached through the SDK's `_iterator` attributes (no public handle exists);
where a later SDK has none, there is nothing to close and this does nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anthropic.lib.streaming import (
    AsyncMessageStream,
    AsyncMessageStreamManager,
    BetaAsyncMessageStream,
    BetaAsyncMessageStreamManager,
)

Stream = AsyncMessageStream[None] | BetaAsyncMessageStream[None]


@asynccontextmanager
async def opened(
    manager: AsyncMessageStreamManager[None] | BetaAsyncMessageStreamManager[None],
) -> AsyncIterator[Stream]:
    """`async with manager as stream`, with the stream's generators closed on the way out."""
    stream: Stream
    async with manager as stream:
        try:
            yield stream
        finally:
            await _close_generators(stream)


async def _close_generators(stream: object) -> None:
    # Outermost first: each is suspended at a `yield`, so closing one never runs into another.
    for owner in (stream, getattr(stream, "_raw_stream", None)):
        # `vars`, not `getattr`: the raw stream makes its generator on first access.
        generator: Any = vars(owner).get("_iterator") if hasattr(owner, "__dict__") else None
        if inspect.isasyncgen(generator):
            await generator.aclose()
