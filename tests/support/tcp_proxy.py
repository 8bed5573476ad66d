"""A TCP proxy a test owns, between the engine and a shared server, to cut and restore.

A database outage without stopping the shared PostgreSQL server: `cut()` stops listening (a new
connection is refused, as by a server that is down) and resets every connection through the
proxy (a session in flight sees its server vanish); `restore()` listens again on the same port.
The proxy runs on the test's event loop; the store's driver talks to it from its own threads.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """`await TcpProxy.start(host, port)`; then point the client at `proxy.port`."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0

    @classmethod
    async def start(cls, target_host: str, target_port: int) -> TcpProxy:
        proxy = cls(target_host, target_port)
        await proxy._listen()
        return proxy

    @property
    def up(self) -> bool:
        return self._server is not None

    def cut(self) -> None:
        """Refuse new connections and reset the open ones, at once (no await: callable from a
        hook at an exact point of a turn)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def restore(self) -> None:
        if self._server is None:
            await self._listen()

    async def close(self) -> None:
        self.cut()
        for pump in list(self._pumps):
            pump.cancel()
        for pump in list(self._pumps):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pump

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self._target)
        except OSError:
            client_w.transport.abort()
            return
        if self._server is None:  # cut while connecting upstream
            client_w.transport.abort()
            server_w.transport.abort()
            return
        self._writers.update((client_w, server_w))
        for reader, writer in ((client_r, server_w), (server_r, client_w)):
            pump = asyncio.create_task(self._pump(reader, writer))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
