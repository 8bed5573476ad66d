"""Run an ASGI app on a free localhost port in a background thread, for tests.

A thread rather than a task in the test's loop, so the server keeps answering while a test (or
a child process the test started) waits on it.
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType
from typing import Any

import uvicorn


class ThreadedServer:
    def __init__(self, app: Any) -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, lifespan="off", ws="none", http="h11", log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        host, port = self._socket.getsockname()
        return f"http://{host}:{port}"

    def start(self) -> None:
        self._thread.start()
        for _ in range(500):
            if self._server.started:
                return
            if not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        raise RuntimeError("the test server did not start")

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> ThreadedServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
