"""A pytest plugin that fails a test whose event loop is blocked for more than 100 ms.

A blocked loop stops everything else the process does at once: Slack acks, lease heartbeats,
renderers. The cause is nearly always sync work in a coroutine or callback (a sleep, a sync
driver call, a file read, a sync tool run on the loop), and a test passes regardless unless
something watches for it.

How it measures. A watchdog thread pings the loop (`call_soon_threadsafe`) every 10 ms and times
the answer. A late answer is not proof of blocking: on a shared, busy machine the OS may leave
the process waiting for a CPU, and that would make the detector flaky. So from the lag it
subtracts, before judging:

- the time the process's threads spent runnable but waiting for a CPU (Linux's per-thread run
  delay, `/proc/self/task/*/schedstat`). The loop thread's own wait is the obvious part; the
  other threads' count too, because a thread descheduled while it holds the GIL keeps the loop
  waiting for the GIL, which looks like blocking from the loop's side;
- steal time (`/proc/stat`): on a virtual machine the host may run something else on our CPU
  while the guest believes the thread is running;
- garbage collection pauses (`gc.callbacks`), which the interpreter takes, not a callback;
- the CPU time the process's other threads used meanwhile: while one holds the GIL the loop
  sleeps waiting for it, which is neither run delay nor a callback's doing.

What remains is time the loop spent inside callbacks, computing or blocked in a sync call: the
thing to catch. The subtraction errs on the side of excusing (it counts every thread's waits,
and on a starved machine they add up to more than the loop lost), so computing is also measured
directly: the loop thread's own CPU time while the ping waited is time spent in callbacks (an
idle loop waits in its selector, using none), and that much is a block however busy the
machine (a 0.6 s computation once passed at load 12 on the subtraction alone). One case has no
sample to go by: the watchdog itself could not run until the loop answered. A loop blocked in a
sync call (a sleep, I/O) has let go of the GIL, so the watchdog can run and sample it, unless
the process is starved in a way /proc does not account for (beside CPU hogs, 130 ms
unexplained in a 600 ms wait, twice in ten runs); a loop keeping the watchdog out by holding
the GIL is running, which its own CPU time shows exactly. So for an unsampled ping the block is
the loop thread's CPU time meanwhile.

A borderline sleep on a starved machine may pass; a real one (a 1 s sleep) is caught on a busy
machine too, and computing on the loop is caught at any load.

Pings count only while the loop runs. pytest-asyncio runs each async fixture and the test in a
`run_until_complete` of its own, and sync fixtures run between them with the loop stopped; a
ping sent then would measure the sync fixture. So `loop.run_forever` and `loop.stop` are wrapped
while the watch is on, and a ping whose answer comes from another run than the one it was sent
in is dropped.

A block is reported with the loop thread's stack, sampled while it was late. Blocks up to the
end of the test's call (fixtures set up after the watch included) fail the test; later ones, in
a fixture's teardown, fail the teardown (an error in pytest's report).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, Generator
from dataclasses import dataclass
from typing import Any

import pytest

THRESHOLD = 0.1
"""Seconds of blocking that fail a test."""

PING_INTERVAL = 0.01

_WATCH = pytest.StashKey["LoopWatch"]()
_REPORTED = pytest.StashKey[int]()


@dataclass(frozen=True, kw_only=True)
class Block:
    blocked: float
    """Seconds the loop spent in callbacks while a ping waited: `lag - run_delay - gc`."""
    lag: float
    run_delay: float
    """Seconds the process waited for a CPU: its threads' run delay plus the machine's steal."""
    gc: float
    where: str
    """The loop thread's stack once the ping was `THRESHOLD` late."""

    def describe(self) -> str:
        return (
            f"the event loop was blocked for {self.blocked * 1000:.0f} ms (a ping waited "
            f"{self.lag * 1000:.0f} ms, of which {self.run_delay * 1000:.0f} ms the process "
            f"waited for a CPU and {self.gc * 1000:.0f} ms collected garbage); the loop thread "
            f"was at:\n{self.where}"
        )


@dataclass(kw_only=True)
class _Ping:
    number: int
    run: int
    delays: dict[str, int]
    steal: float
    gc: float
    sent: float
    where: str = ""
    waiting_for_io: bool = False
    """When sampled, the loop thread was in its selector, waiting to be woken: not in a callback."""
    loop_cpu: int = 0
    """Nanoseconds the loop thread had run on a CPU when the ping was sent."""
    others_cpu: int = 0
    """Nanoseconds the process's other threads had run on a CPU when the ping was sent."""


class _RunDelay:
    """Nanoseconds each of the process's threads has waited for a CPU, from /proc.

    Files stay open and are re-read with `pread` (about 1 µs each); an unreadable /proc
    (not Linux) reads as no waiting, which only makes the watch stricter."""

    def __init__(self) -> None:
        self._files: dict[str, int] = {}
        self._closed = False
        # The watchdog and the loop (judging a late ping) both read, and `stop` closes while a
        # watchdog that outlived its join may still read: unguarded, one closed or popped a file
        # the other was using (a KeyError or EBADF that killed the watchdog thread).
        self._lock = threading.Lock()

    def read(self) -> dict[str, int]:
        with self._lock:
            if self._closed:
                return {}
            try:
                tids = os.listdir("/proc/self/task")
            except OSError:
                return {}
            delays: dict[str, int] = {}
            for tid in tids:
                reading = self._field(tid, 1)
                if reading is not None:
                    delays[tid] = reading
            for gone in self._files.keys() - delays.keys():
                with contextlib.suppress(OSError):
                    os.close(self._files.pop(gone))
            return delays

    def others_cpu(self, tid: str) -> int:
        """Nanoseconds every thread but `tid` has run on a CPU (threads that ended drop out,
        which only makes the watch stricter)."""
        with self._lock:
            if self._closed:
                return 0
            try:
                tids = os.listdir("/proc/self/task")
            except OSError:
                return 0
            return sum(self._field(other, 0) or 0 for other in tids if other != tid)

    def cpu(self, tid: str) -> int:
        """Nanoseconds thread `tid` has run on a CPU (0 where unreadable)."""
        with self._lock:
            reading = None if self._closed else self._field(tid, 0)
            return reading or 0

    def _field(self, tid: str, index: int) -> int | None:
        """One number of the thread's schedstat; None when the thread ended meanwhile."""
        fd = self._files.get(tid)
        try:
            if fd is None:
                fd = self._files[tid] = os.open(f"/proc/self/task/{tid}/schedstat", os.O_RDONLY)
            return int(os.pread(fd, 128, 0).split()[index])
        except (OSError, IndexError, ValueError):
            return None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for fd in self._files.values():
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._files.clear()


class _Steal:
    """Seconds of CPU time the hypervisor gave to others, all CPUs together, from /proc/stat
    (in clock ticks, so to 10 ms); no /proc reads as none."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/stat", os.O_RDONLY)
        except OSError:
            self._fd = None
        self._tick = 1 / os.sysconf("SC_CLK_TCK")
        self._lock = threading.Lock()  # read by the watchdog and the loop, closed by `stop`

    def read(self) -> float:
        with self._lock:
            if self._fd is None:
                return 0.0
            try:
                fields = os.pread(self._fd, 256, 0).split(b"\n", 1)[0].split()
                # cpu user nice system idle iowait irq softirq steal
                return int(fields[8]) * self._tick
            except (OSError, IndexError, ValueError):
                return 0.0

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = None


def _waited(before: dict[str, int], after: dict[str, int]) -> float:
    """Seconds of run delay between two readings; a thread started meanwhile counts whole."""
    return sum(delay - before.get(tid, 0) for tid, delay in after.items()) / 1e9


class LoopWatch:
    """Start on the loop's own thread; `stop` returns the blocks seen."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        threshold: float = THRESHOLD,
        interval: float = PING_INTERVAL,
    ) -> None:
        self._loop = loop
        self._threshold = threshold
        self._interval = interval
        self.blocks: list[Block] = []
        self._run = 0
        """Bumped whenever the loop starts or stops running."""
        self._running = False
        self._ping = 0
        self._pending: _Ping | None = None
        self._answered = threading.Event()
        self._gc_seconds = 0.0
        self._gc_started = 0.0
        self._run_delay = _RunDelay()
        self._steal = _Steal()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)
        self._loop_thread = 0
        self._loop_tid = ""
        self._replaced: dict[str, Any] = {}
        self.pings = 0
        """Pings answered: how many times the loop was measured."""
        self.failed_pings: list[str] = []
        """Pings the watchdog could not send or time (the error of each); it went on regardless."""

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._loop_tid = str(threading.get_native_id())
        self._running = self._loop.is_running()
        self._wrap_loop()
        gc.callbacks.append(self._on_gc)
        self._thread.start()

    def stop(self) -> list[Block]:
        self._stopping.set()
        self._answered.set()  # the watchdog may be waiting on the loop, which waits on it here
        self._thread.join(10)
        gc.callbacks.remove(self._on_gc)
        self._unwrap_loop()
        self._run_delay.close()
        self._steal.close()
        return self.blocks

    # -- knowing when the loop runs -------------------------------------------------------

    def _wrap_loop(self) -> None:
        # What was there before, so a watch inside another (a test's own, under the fixture's)
        # puts the outer one's wrappers back when it stops.
        self._replaced = {
            name: vars(self._loop)[name]
            for name in ("run_forever", "stop")
            if name in vars(self._loop)
        }
        run_forever: Callable[[], None] = self._loop.run_forever
        stop: Callable[[], None] = self._loop.stop

        def watched_run_forever() -> None:
            self._ran(True)
            try:
                run_forever()
            finally:
                self._ran(False)

        def watched_stop() -> None:
            self._ran(False)
            stop()

        loop: Any = self._loop
        loop.run_forever = watched_run_forever
        loop.stop = watched_stop

    def _unwrap_loop(self) -> None:
        loop: Any = self._loop
        for name in ("run_forever", "stop"):
            if name in self._replaced:
                setattr(loop, name, self._replaced[name])
            else:
                with contextlib.suppress(AttributeError):
                    delattr(loop, name)

    def _ran(self, running: bool) -> None:
        self._running = running
        self._run += 1

    def _on_gc(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started:
            self._gc_seconds += time.perf_counter() - self._gc_started
            self._gc_started = 0.0

    # -- the watchdog thread and the loop's answers --------------------------------------------

    def _watch(self) -> None:
        """The watchdog never dies: an exception escaping a thread is reported by pytest as an
        unhandled-thread-exception warning in whatever test runs then (an error under
        `filterwarnings = error`), and a dead watchdog would stop catching blocks silently.
        A failed ping is counted and the next one sent."""
        while not self._stopping.wait(self._interval):
            if self._running:
                try:
                    self._send_one()
                except Exception as err:  # kept alive on purpose, see above
                    self.failed_pings.append(repr(err))

    def _send_one(self) -> None:
        self._ping += 1
        ping = _Ping(
            number=self._ping,
            run=self._run,
            delays=self._run_delay.read(),
            steal=self._steal.read(),
            gc=self._gc_seconds,
            sent=time.monotonic(),
            loop_cpu=self._run_delay.cpu(self._loop_tid),
            others_cpu=self._run_delay.others_cpu(self._loop_tid),
        )
        self._pending = ping
        self._answered.clear()
        if self._stopping.is_set():
            return  # `stop` may have set `_answered` just before the clear; it waits for us
        try:
            self._loop.call_soon_threadsafe(self._pong, ping.number)
        except RuntimeError:  # the loop was closed
            self._stopping.set()
            return
        if self._answered.wait(self._threshold):
            return
        frame = sys._current_frames().get(self._loop_thread)
        ping.waiting_for_io = _in_selector(frame)
        ping.where = self._loop_stack()
        while not self._answered.wait(self._interval):
            if self._stopping.is_set() or self._run != ping.run:
                return  # the loop stopped meanwhile; a late answer is dropped in `_pong`

    def _pong(self, number: int) -> None:
        """On the loop: judge the ping here, so a block is on record before the loop can go on
        to end the test (the test's last step may be the one that blocked)."""
        answered = time.monotonic()
        ping = self._pending
        if ping is None or ping.number != number or self._stopping.is_set():
            return
        self._pending = None
        try:
            if ping.run == self._run:  # else the lag includes the loop standing still
                self._judge(ping, answered - ping.sent)
        finally:
            self._answered.set()  # only now: the watchdog reads /proc with the same files

    def _judge(self, ping: _Ping, lag: float) -> None:
        self.pings += 1
        if lag <= self._threshold:
            return
        # Rare, so the readings are taken here, on the loop, once it is free again.
        waited = _waited(ping.delays, self._run_delay.read()) + self._steal.read() - ping.steal
        collected = self._gc_seconds - ping.gc
        # What the loop thread computed while the ping waited: callbacks, since an idle loop
        # waits in its selector without a CPU. However starved the machine, that much blocked.
        ran = (self._run_delay.cpu(self._loop_tid) - ping.loop_cpu) / 1e9 - collected
        # What the process's other threads computed meanwhile (a store thread, a server thread
        # of a stand-in): while one of them holds the GIL, the loop waits for it asleep, which
        # is neither run delay nor the loop's own doing (a 259 ms wait in `SimpleQueue.put`,
        # beside two CPU hogs). Computing on the loop itself is still caught by `ran`.
        others = (self._run_delay.others_cpu(self._loop_tid) - ping.others_cpu) / 1e9
        # Not sampled: the loop held the GIL, which only computing does, so what it ran is the
        # block. Sampled: the lag less the waits (a sync call, a sleep, uses no CPU), or what it
        # ran where the waits of every thread, all subtracted, excuse more than the OS did.
        blocked = max(lag - waited - collected - others, ran) if ping.where else ran
        # Seen waiting in its selector with the ping already due: the loop was not running a
        # callback, the wake-up (a write to its self-pipe) had not reached it yet. On a starved
        # machine that wait is not always counted as run delay; it is never the code's doing.
        if blocked > self._threshold and (not ping.waiting_for_io or ran > self._threshold):
            self.blocks.append(
                Block(
                    blocked=blocked,
                    lag=lag,
                    run_delay=waited,
                    gc=collected,
                    where=ping.where or "  (not sampled: the watchdog itself was kept waiting)\n",
                )
            )

    def _loop_stack(self) -> str:
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "  (no stack)\n"
        return "".join(traceback.format_stack(frame, limit=25))


def _in_selector(frame: Any) -> bool:
    """Whether the innermost Python frame is the event loop's selector call (`select` in the
    standard library's `selectors` module), where an idle loop waits for I/O."""
    return (
        frame is not None
        and frame.f_code.co_name == "select"
        and frame.f_code.co_filename.endswith("selectors.py")
    )


def _report(blocks: list[Block]) -> str:
    worst = max(blocks, key=lambda b: b.blocked)
    more = f" ({len(blocks)} blocks; the longest:)" if len(blocks) > 1 else ""
    return (
        f"{more} {worst.describe()}\nFix the blocking call (run it in a thread, or use the "
        "async API); never raise the threshold to hide it."
    ).strip()


@pytest.fixture
async def loop_watch(request: pytest.FixtureRequest) -> AsyncIterator[LoopWatch]:
    """Watch this test's event loop from here to the end of its teardown."""
    watch = LoopWatch(asyncio.get_running_loop())
    watch.start()
    request.node.stash[_WATCH] = watch
    try:
        yield watch
    finally:
        blocks = watch.stop()
    unreported = blocks[request.node.stash.get(_REPORTED, 0) :]
    if unreported:
        pytest.fail("in a fixture: " + _report(unreported), pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """Fail the test itself, not only its teardown, when the loop was blocked up to its end."""
    result = yield
    watch = item.stash.get(_WATCH, None)
    if watch is not None and watch.blocks:
        item.stash[_REPORTED] = len(watch.blocks)
        pytest.fail(_report(list(watch.blocks)), pytrace=False)
    return result
