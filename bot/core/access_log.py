"""The web process's access log: one line per HTTP request, as a pure ASGI middleware.

uvicorn's own access log is off (`bot.cli.commands.run_web`): it writes the full path with its
query string, where an OAuth `code`, a `state` or a signed-in console's search terms would land,
and its lines are not the bot's JSON. Here a line carries the method, the path without its
query, the status, the duration and the bytes sent, on the `bot.access` logger. Probes
(`/healthz`, `/readyz`, `/metrics`), which a load balancer and a scraper send every few
seconds, log at DEBUG so they do not bury the requests a person made.

It is pure ASGI, not Starlette's `BaseHTTPMiddleware`, so a streaming response (the API's and the
console's event streams) passes through untouched, logged once when it ends.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("bot.access")

PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


class AccessLog:
    def __init__(self, app: ASGIApp, *, clock: Any = time.perf_counter) -> None:
        self.app = app
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = self.clock()
        status = 500  # what the client sees when the app raises before it answers
        sent = 0

        async def counting(message: Message) -> None:
            nonlocal status, sent
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body":
                sent += len(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, counting)
        finally:
            path = str(scope.get("path", ""))
            log.log(
                logging.DEBUG if path in PROBES and status < 500 else logging.INFO,
                "%s %s %d",
                scope.get("method", ""),
                path,
                status,
                extra={
                    "method": scope.get("method", ""),
                    "path": path,
                    "status": status,
                    "duration_ms": round((self.clock() - started) * 1000, 1),
                    "bytes": sent,
                },
            )
