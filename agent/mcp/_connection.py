"""One `ClientSession` per server per process, opened lazily on the loop that first needs it,
held open by a background task (the SDK's transports must be entered and left in one task),
reopened after the server goes away, and closed with the agent's MCP clients.

Nothing here blocks the event loop: spawning a stdio server, the HTTP handshake and every call
are awaited, each bounded by the declaration's timeouts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import httpx2
from mcp import ClientSession, MCPError
from mcp.client._transport import TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.types import CONNECTION_CLOSED, CallToolResult, Tool

from agent._mcp_declarations import McpServer, Resolved

log = logging.getLogger(__name__)

IDEMPOTENCY_META_KEY = "idempotency_key"
"""The `_meta` key under which a write's idempotency key reaches the server (see docs/mcp.md)."""


class ServerUnavailableError(Exception):
    """The server could not be reached (spawned, connected, initialised): nothing was sent."""


class McpConnection:
    """The process's session with one server. `session()` opens it if needed; a session whose
    transport ended (the server died, the connection dropped) is replaced on the next call."""

    def __init__(self, server: McpServer, resolved: Resolved) -> None:
        self.server = server
        self._resolved = resolved
        self._session: ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._holder: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None

    async def session(self) -> ClientSession:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A session lives on the loop it was opened on; another loop (a test's, a CLI
            # run's) opens its own and forgets the old one, which its own loop's end closes.
            self._loop, self._session, self._holder = loop, None, None
            self._lock, self._closing = asyncio.Lock(), None
        assert self._lock is not None
        async with self._lock:
            holder = self._holder
            if self._session is not None and holder is not None and not holder.done():
                return self._session
            if holder is not None and not holder.done():
                await self._stop()  # a dropped session's holder: let it finish first
            return await self._open()

    async def _open(self) -> ClientSession:
        ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(
            self._hold(ready, self._closing), name=f"mcp-{self.server.name}"
        )
        try:
            async with asyncio.timeout(self.server.connect_timeout):
                self._session = await asyncio.shield(ready)
        except TimeoutError:
            await self._stop()
            raise ServerUnavailableError(
                f"no answer within {self.server.connect_timeout:g}s"
            ) from None
        except ServerUnavailableError:
            await self._stop()
            raise
        return self._session

    async def _hold(self, ready: asyncio.Future[ClientSession], closing: asyncio.Event) -> None:
        try:
            async with (
                self._transport() as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                ready.set_result(session)
                await closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(ServerUnavailableError(_describe(exc)))
            elif not isinstance(exc, asyncio.CancelledError | GeneratorExit):
                log.warning(
                    "MCP server %s: connection ended (%s)", self.server.name, _describe(exc)
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            if self._holder is asyncio.current_task():
                self._session = None  # the next call opens a new session (reconnects)

    def _transport(self) -> contextlib.AbstractAsyncContextManager[TransportStreams]:
        server = self.server
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command,
                args=list(server.args),
                env=dict(self._resolved.env) or None,
                cwd=server.cwd,
            )
            return stdio_client(params)
        assert server.url is not None
        return _http(server.url, self._resolved.headers, server.idempotency_header)

    async def list_tools(self) -> list[Tool]:
        session = await self.session()
        tools: list[Tool] = []
        cursor: str | None = None
        async with asyncio.timeout(self.server.timeout):
            while True:
                from mcp.types import PaginatedRequestParams

                page = await session.list_tools(
                    params=PaginatedRequestParams(cursor=cursor) if cursor else None
                )
                tools.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    return tools

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        meta: Mapping[str, Any] | None,
        seconds: float,
    ) -> CallToolResult:
        """One `tools/call`; the session must be open already (`session()`), so a failure here
        happened after the request could have been sent."""
        session = self._session
        if session is None:
            raise ServerUnavailableError("the connection ended before the call")
        # The SDK's own read timeout answers first; the outer bound covers a transport that
        # never gives up (a stalled HTTP stream).
        try:
            async with asyncio.timeout(seconds + 5):
                result = await session.call_tool(
                    name,
                    arguments,
                    read_timeout_seconds=seconds,
                    meta=dict(meta) if meta else None,  # type: ignore[arg-type]
                )
        except Exception as exc:
            if _connection_lost(exc):
                self._drop(session)
            raise
        if not isinstance(result, CallToolResult):
            raise TypeError(f"unexpected {type(result).__name__} for tools/call")
        return result

    def _drop(self, session: ClientSession) -> None:
        """The transport under `session` ended (the server died, the connection dropped): let
        its holder close what is left, and have the next call open a new session."""
        if self._session is session:
            self._session = None
            if self._closing is not None:
                self._closing.set()

    async def _stop(self) -> None:
        if self._closing is not None:
            self._closing.set()
        holder, self._holder, self._session = self._holder, None, None
        if holder is not None and holder.get_loop() is asyncio.get_running_loop():
            try:
                async with asyncio.timeout(10):
                    await asyncio.shield(holder)
            except (TimeoutError, Exception):
                holder.cancel()
                with contextlib.suppress(BaseException):
                    await holder

    async def close(self) -> None:
        """Close the session (a stdio server's process ends with it)."""
        if self._loop is asyncio.get_running_loop():
            await self._stop()


def _connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.error.code == CONNECTION_CLOSED
    return isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError)


def _describe(exc: BaseException) -> str:
    """An error's kind and first message, for logs and the model; never headers or env."""
    if isinstance(exc, BaseExceptionGroup):
        inner = exc.exceptions[0] if exc.exceptions else exc
        return _describe(inner)
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@contextlib.asynccontextmanager
async def _http(
    url: str, headers: Mapping[str, str], idempotency_header: str | None
) -> AsyncIterator[TransportStreams]:
    client = create_mcp_http_client(headers=dict(headers))
    if idempotency_header is not None:
        client.event_hooks = {"request": [_idempotency_hook(idempotency_header)]}
    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


def _idempotency_hook(header: str) -> Any:
    """Copy a `tools/call`'s `_meta` idempotency key into the header the server documents: the
    SDK sends no per-call headers, but each call is its own POST whose body says which it is."""

    async def hook(request: httpx2.Request) -> None:
        if request.method != "POST":
            return
        try:
            body = json.loads(request.content or b"null")
        except (ValueError, httpx2.RequestNotRead):
            return
        params = body.get("params") if isinstance(body, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        key = meta.get(IDEMPOTENCY_META_KEY) if isinstance(meta, dict) else None
        if body.get("method") == "tools/call" and isinstance(key, str):
            request.headers[header] = key

    return hook
