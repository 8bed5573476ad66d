"""Run an ASGI app under uvicorn on a socket bound up front: in the current event loop, or in a
thread with a loop of its own.

Binding first means the caller knows the port before anything listens (port 0 picks a free one).
`start()`/`stop()` serve in the caller's loop, so the server is stopped by the loop that started
it and tests and the offline demo shut down cleanly instead of leaving a task or a port behind.
`start_in_thread()`/`stop_thread()` (or `with`) serve from a thread, for a server that must keep
answering while the caller's loop is busy or blocked, or has no loop at all (a sync test, a
child process waiting on it).

Stopping takes as long as the requests still in flight, no longer: uvicorn's own loop looks for
`should_exit` every 0.1 s, and its shutdown waits 0.1 s, then polls every 0.1 s, for connections
to close (the test suite stops two servers per bot test: those waits were a sixth of its time).
Requests still running after `grace` seconds are cancelled, as uvicorn does after its graceful
timeout.

Some requests never end by themselves (an event stream): told nothing, a stopping server waits
its whole grace for them and then cuts them. So the app learns that the server is stopping
before the server waits: `BackgroundServer` calls the `ON_SHUTDOWN` callable the app's lifespan
put in the lifespan state, and under uvicorn's own server (`bot serve`, which may fork
workers) `on_stop_signal` calls it when the signal that stops the server arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

import uvicorn

ON_SHUTDOWN = "on_shutdown"
"""The lifespan state key of what the app does when its server begins to stop (a callable)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""What uvicorn stops on."""


@contextlib.contextmanager
def on_stop_signal(callback: Callable[[], None]) -> Iterator[None]:
    """Call `callback` on the running loop when a stop signal arrives, then pass the signal on
    to the handler that was there (uvicorn's, which begins its shutdown). Only in the main
    thread, where signals are delivered; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}

    def handle(sig: int, frame: FrameType | None) -> None:
        with contextlib.suppress(RuntimeError):  # its loop has closed
            loop.call_soon_threadsafe(callback)
        passed = previous[signal.Signals(sig)]
        if callable(passed):
            passed(sig, frame)
        elif passed == signal.SIG_DFL:  # what the signal would have done
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    for sig in STOP_SIGNALS:
        signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is handle:
                signal.signal(sig, handler)


class _Server(uvicorn.Server):
    """uvicorn's server, woken at once by `exit()` and shut down without fixed waits."""

    def __init__(self, config: uvicorn.Config, *, grace: float) -> None:
        super().__init__(config)
        self.grace = grace
        self._tick: asyncio.Future[None] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """Signals are the process's owner's: uvicorn's own would take SIGTERM for this server
        alone and, once it stopped, raise it again with the default handler, killing a process
        that serves its main app beside this one (`bot serve --offline`'s Slack stand-in)."""
        yield

    def exit(self) -> None:
        """On the server's loop: stop serving now."""
        self.should_exit = True
        _wake(self._tick)

    async def main_loop(self) -> None:
        # uvicorn's ticks (the Date header, request limits) once per 0.1 s, as in its own loop,
        # but `exit` wakes it at once rather than at the next tick. A future and a timer, not a
        # task per tick: tests wait for the tasks a request started to end.
        loop = asyncio.get_running_loop()
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864000
            self._tick = loop.create_future()
            timer = loop.call_later(0.1, _wake, self._tick)
            try:
                await self._tick
            finally:
                timer.cancel()
                self._tick = None

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        closing = getattr(self.lifespan, "state", {}).get(ON_SHUTDOWN)
        if callable(closing):
            closing()
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        state = self.server_state
        for connection in list(state.connections):
            connection.shutdown()  # an idle keep-alive connection closes now, a busy one after
        if state.tasks:  # the requests in flight
            _, late = await asyncio.wait(set(state.tasks), timeout=self.grace)
            for task in late:
                task.cancel(msg="the server stopped")
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()


def _wake(tick: asyncio.Future[None] | None) -> None:
    if tick is not None and not tick.done():
        tick.set_result(None)


class BackgroundServer:
    def __init__(
        self, app: Any, *, host: str = "127.0.0.1", port: int = 0, grace: float = 2.0
    ) -> None:
        """`grace`: seconds that requests in flight at `stop` get to finish."""
        self._app = app
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.host = host
        self.port: int = self._sock.getsockname()[1]
        # `log_config=None`: uvicorn's own would replace the process's logging (its handlers
        # on the `uvicorn` loggers bypass the root handler, and with it the secret scrubbing).
        config = uvicorn.Config(
            app, log_level="warning", log_config=None, lifespan="on", access_log=False
        )
        self._server = _Server(config, grace=grace)
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # -- in the caller's loop ------------------------------------------------------------------

    async def start(self) -> BackgroundServer:
        self._task = asyncio.create_task(self._serve())
        await self._started()
        return self

    async def stop(self) -> None:
        if self._task is None:
            self._sock.close()
            return
        self._server.exit()
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

    # -- in a thread of its own ----------------------------------------------------------------

    def start_in_thread(self, within: float = 10.0) -> BackgroundServer:
        """Serve from a daemon thread running its own event loop; returns once it listens."""
        listening = threading.Event()
        failed: list[BaseException] = []

        async def main() -> None:
            self._thread_loop = asyncio.get_running_loop()
            self._task = asyncio.create_task(self._serve())
            try:
                await self._started()
            except BaseException as exc:
                failed.append(exc)
                raise
            finally:
                listening.set()
            await self._task

        self._thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        self._thread.start()
        if not listening.wait(within):
            raise RuntimeError(f"the server did not start within {within} s")
        if failed:
            raise RuntimeError("the server stopped while starting") from failed[0]
        return self

    def stop_thread(self, within: float = 10.0) -> None:
        if self._thread is None:
            self._sock.close()
            return
        loop = self._thread_loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop has ended already
                loop.call_soon_threadsafe(self._server.exit)
        self._thread.join(within)
        self._thread = None
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start_in_thread()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_thread()

    # -- both ----------------------------------------------------------------------------------

    async def _serve(self) -> None:
        await self._server.serve(sockets=[self._sock])

    async def _started(self) -> None:
        """Wait, on the serving loop, until uvicorn listens (it has no event to wait on)."""
        assert self._task is not None
        while not self._server.started:
            if self._task.done():
                await self._task
                raise RuntimeError("the server stopped while starting")
            await asyncio.sleep(0.005)
