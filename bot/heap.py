"""Keep the garbage collector's full passes short and rare in a long-running process."""

from __future__ import annotations

import gc

FULL_PASS_EVERY = 100
"""Young-generation passes (of 10 each) between full passes, where CPython's default is 10."""


def freeze_startup_heap() -> None:
    """Move everything alive once the process has started (modules, the agent, the engines,
    SQLAlchemy's and pydantic's caches) out of the collector's reach for good, and make full
    passes ten times rarer.

    A full collection walks every tracked object, and after startup that is mostly these; in a
    web process taking 200 events/s with turns running, each full pass held the event loop for
    100-150 ms, and those passes were most of the ack time's p99 (57-100 ms; 12-22 ms with the
    startup heap frozen). Over a 30 s burst the heap grows again (a renderer and its queue per
    thread waiting for its turn): full passes of 90-180 ms came every second or two and the
    p99 reached 160 ms; with one full pass where there had been ten, it stayed at 47-60 ms
    (`bench.ack_latency --seconds 30`). Garbage in cycles waits longer for its pass; all else
    is freed at once, as ever. Called once per process after it started, never in library
    code: an object frozen here is never freed, even once unreachable.
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_EVERY)
