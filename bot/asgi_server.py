"""Run an ASGI app under uvicorn inside the current event loop, on a socket bound up front.

Binding first means the caller knows the port before anything listens (port 0 picks a free one),
and the server is stopped by the same loop that started it, so tests and the offline demo shut
down cleanly instead of leaving a thread or a port behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from types import TracebackType
from typing import Any

import uvicorn


class BackgroundServer:
    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", access_log=False, timeout_graceful_shutdown=2
        )
        self._server = uvicorn.Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> BackgroundServer:
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        while not self._server.started:
            if self._task.done():
                await self._task
                raise RuntimeError("the server stopped while starting")
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        if self._task is None:
            self._sock.close()
            return
        self._server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        self._sock.close()

    async def __aenter__(self) -> BackgroundServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
