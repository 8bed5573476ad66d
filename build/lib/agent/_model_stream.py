"""The model's stream as the turn loop reads it: closed on the way out, whatever it is."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from typing import Protocol, runtime_checkable

from agent._model_seam import Model, ModelEvent, ModelRequest


@runtime_checkable
class _Closable(Protocol):
    def aclose(self) -> Awaitable[object]: ...


@asynccontextmanager
async def model_stream(
    model: Model, request: ModelRequest
) -> AsyncIterator[AsyncIterator[ModelEvent]]:
    """The model's stream, closed on the way out if it can be closed.

    The loop may stop reading early (a cancel between deltas, an error), and an adapter that is
    an async generator may still hold an HTTP response then: it must be closed at once, not left
    to the garbage collector. The `Model` Protocol promises only an `AsyncIterator`, though, and
    a plain iterator has no `aclose`; demanding one (`contextlib.aclosing`) failed every turn of
    a model written to the Protocol.
    """
    stream = model.stream(request)
    try:
        yield stream
    finally:
        if isinstance(stream, _Closable):
            await stream.aclose()
