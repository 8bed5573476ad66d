"""A `Model` written only to the Protocol: its stream is a plain `AsyncIterator`, not an async
generator, so it has no `aclose`. A host may well write one this way; the engine must not assume
more of a model than the seam declares.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

from agent import ModelError
from agent.seams import ModelEvent, ModelRequest


class PlainStream:
    """`__aiter__` and `__anext__`, nothing else; an exception in the script is raised there."""

    def __init__(self, events: Iterable[ModelEvent | Exception]) -> None:
        self._events = iter(events)
        self.handed_out = 0

    def __aiter__(self) -> PlainStream:
        return self

    async def __anext__(self) -> ModelEvent:
        item = next(self._events, None)
        if item is None:
            raise StopAsyncIteration
        if isinstance(item, Exception):
            raise item
        self.handed_out += 1
        return item


class PlainModel:
    """Answers each call with the next scripted stream, in call order; records the requests."""

    def __init__(self, *streams: Sequence[ModelEvent | Exception]) -> None:
        self._streams: deque[Sequence[ModelEvent | Exception]] = deque(streams)
        self.requests: list[ModelRequest] = []
        self.opened: list[PlainStream] = []

    def add(self, *streams: Sequence[ModelEvent | Exception]) -> None:
        self._streams.extend(streams)

    def stream(self, request: ModelRequest) -> PlainStream:
        self.requests.append(request)
        script = self._streams.popleft() if self._streams else [ModelError("no reply scripted")]
        opened = PlainStream(script)
        self.opened.append(opened)
        return opened
