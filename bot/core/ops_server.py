"""What an operator's tools ask of every bot process: `/metrics`, `/healthz`, `/readyz`.

`bot serve` answers them on its own port (`bot.core.serving` adds `ops_routes`); `bot worker`,
`bot clock` and `bot socket` serve no HTTP of their own, so with `METRICS_PORT` set they run an
`OpsServer` on `METRICS_HOST:METRICS_PORT`, on their own event loop, beside their work.

`/metrics` takes `Authorization: Bearer <METRICS_TOKEN>` when that is set (compared in constant
time; 401 otherwise). `/readyz` answers 200 `{"ready": true}`, or 503 naming what is not ready
(`bot.core.readiness`). A scrape never fails because the database does: its gauges go absent and
`bot_database_up` reads 0 (`bot.core.metrics_gauges`).

Multiprocess (`PROMETHEUS_MULTIPROC_DIR` set, as `bot serve` does with `WEB_CONCURRENCY` > 1):
the scrape sums every web process's files (`MultiProcessCollector`) instead of this process's
registry; the database gauges are read once, by whichever process answered.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Protocol

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent import SessionStore
from bot.core.asgi_server import BackgroundServer
from bot.core.metrics import BotMetrics
from bot.core.metrics_gauges import StoreGaugeCollector
from bot.core.readiness import Readiness

log = logging.getLogger(__name__)

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
STOP_WITHIN = 5.0
"""Seconds an `OpsServer` may take to stop before its task is cancelled outright."""

Handler = Callable[[Request], Awaitable[Response]]


class Ops:
    """A bot's metrics and readiness, answered over HTTP."""

    def __init__(
        self,
        *,
        metrics: BotMetrics,
        store: SessionStore,
        redis_url: str | None,
        token: str | None,
        gauge_ttl: float = 2.0,
    ) -> None:
        """`gauge_ttl`: seconds a scrape reuses the database gauges' last reading."""
        self.metrics = metrics
        self.gauges = StoreGaugeCollector(store, ttl=gauge_ttl)
        self.readiness = Readiness(store, redis_url)
        self._expected = f"Bearer {token}".encode() if token else None

    def authorized(self, request: Request) -> bool:
        if self._expected is None:
            return True
        given = request.headers.get("authorization", "").encode("utf-8", "replace")
        return hmac.compare_digest(given, self._expected)

    async def metrics_response(self, request: Request) -> Response:
        if not self.authorized(request):
            return JSONResponse(
                {"error": "unauthorized"}, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        await self.gauges.refresh()
        body = await exposition(self.metrics, self.gauges)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def ready_response(self, request: Request) -> Response:
        problems = await self.readiness.problems()
        if problems:
            return JSONResponse({"ready": False, "not_ready": problems}, status_code=503)
        return JSONResponse({"ready": True})

    async def close(self) -> None:
        await self.readiness.close()


async def exposition(metrics: BotMetrics, gauges: StoreGaugeCollector) -> bytes:
    """The text format of everything this process (or, multiprocess, every web process) has."""
    directory = os.environ.get(MULTIPROC_DIR)
    if not directory:
        registry = CollectorRegistry()
        registry.register(_Of(metrics.registry))
        registry.register(gauges)
        return generate_latest(registry)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=directory)
    registry.register(gauges)
    return await asyncio.to_thread(generate_latest, registry)  # it reads every process's files


class _Of:
    """One registry's metrics, collected as part of another."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()


def ops_routes(ops_of: Callable[[Request], Ops]) -> list[Route]:
    """`/metrics` and `/readyz` for an app that has `/healthz` already (`bot serve`)."""

    async def metrics(request: Request) -> Response:
        return await ops_of(request).metrics_response(request)

    async def ready(request: Request) -> Response:
        return await ops_of(request).ready_response(request)

    return [
        Route("/metrics", metrics, methods=["GET"]),
        Route("/readyz", ready, methods=["GET"]),
    ]


def ops_app(ops: Ops, health: Handler) -> Starlette:
    """The three endpoints alone, for a process that serves nothing else."""
    return Starlette(
        routes=[Route("/healthz", health, methods=["GET"]), *ops_routes(lambda _: ops)]
    )


class OpsServer:
    """`ops_app` on `host:port` in the running loop; `await stop()` always ends."""

    def __init__(self, ops: Ops, health: Handler, *, host: str, port: int) -> None:
        self._server = BackgroundServer(ops_app(ops, health), host=host, port=port, grace=1.0)
        self.port = self._server.port

    @property
    def url(self) -> str:
        return self._server.url

    async def start(self) -> OpsServer:
        await self._server.start()
        log.info("serving metrics", extra={"port": self.port})
        return self

    async def __aenter__(self) -> OpsServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stop serving: requests in flight get a second; past `STOP_WITHIN` the server's task
        is cancelled, so a shutdown never waits on a stuck scrape."""
        stopping = asyncio.ensure_future(self._server.stop())
        done, _ = await asyncio.wait([stopping], timeout=STOP_WITHIN)
        if not done:
            log.warning("the metrics server did not stop in %s s; cancelled", STOP_WITHIN)
            stopping.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await stopping  # cancelling it cancels the serving task it awaits


class OpsHost(Protocol):
    """A bot whose ops endpoints a process serves (`bot.app.SlackBot` is one)."""

    @property
    def ops(self) -> Ops: ...

    async def health(self, request: Request) -> Response: ...


class OpsPortError(Exception):
    """`METRICS_PORT` cannot be served (taken, or not this host's): said in one line at start."""


@contextlib.asynccontextmanager
async def ops_serving(
    bot: OpsHost, *, host: str, port: int | None
) -> AsyncIterator[OpsServer | None]:
    """`bot worker`, `bot clock`, `bot socket`: the ops endpoints on `host:port` while the
    block runs (`METRICS_PORT`); nothing when `port` is None."""
    if port is None:
        yield None
        return
    try:
        server = await OpsServer(bot.ops, bot.health, host=host, port=port).start()
    except OSError as err:
        raise OpsPortError(
            f"cannot serve metrics on METRICS_HOST {host}, METRICS_PORT {port}: "
            f"{err.strerror or err}; choose a free port, or unset METRICS_PORT"
        ) from None
    try:
        yield server
    finally:
        await server.stop()
