"""A model built the first time a turn needs it, for processes that may never run one.

A web process with `RUN_TURNS=false` only acks and queues: importing the Anthropic SDK there
(about 3 s of CPU and some 3,000 modules, most of them its types) only slows every start and
restart of the web tier, several processes at once under `WEB_CONCURRENCY`. Whatever would be
wrong with the model's settings is still caught at start by `Settings.require`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from agent.seams import Model, ModelEvent, ModelRequest, ModelSettings, model_compacts


class DeferredModel:
    def __init__(
        self, build: Callable[[], Model], *, compacts: Callable[[ModelSettings], bool] | None = None
    ) -> None:
        """`compacts`: how the model will answer `compacts_context` (the `Model` seam's optional
        capability), for the runtime to ask before the model is built; building it to ask would
        import the SDK for a question its settings answer. Unset, the window stands until the
        model is built (the bot defers only where no turn runs, so nothing asks)."""
        self._build = build
        self._compacts = compacts
        self._model: Model | None = None
        self._building: asyncio.Lock | None = None

    @property
    def built(self) -> bool:
        return self._model is not None

    def compacts_context(self, settings: ModelSettings) -> bool:
        if self._model is not None:
            return model_compacts(self._model, settings)
        return self._compacts is not None and self._compacts(settings)

    async def _ready(self) -> Model:
        if self._model is None:
            if self._building is None:
                self._building = asyncio.Lock()
            async with self._building:
                if self._model is None:
                    # On a thread: the import is seconds of work the event loop must not wait on.
                    self._model = await asyncio.to_thread(self._build)
        return self._model

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        inner = (await self._ready()).stream(request)
        try:
            async for event in inner:
                yield event
        finally:
            close = getattr(inner, "aclose", None)
            if close is not None:  # the loop stopped reading: release the model's connection
                await close()
