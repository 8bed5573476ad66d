"""Keep the garbage collector's full passes short and rare in a long-running process."""

from __future__ import annotations

import gc

FULL_PASS_EVERY = 100
"""Young-generation passes (of 10 each) between full passes, where CPython's default is 10."""


def freeze_startup_heap() -> None:
    """Move everything alive once the process has started (modules, the agent, the engines,
    SQLAlchemy's and pydantic's caches) out of the collector's reach for good, and make full
    passes ten times rarer.

    A full collection walks every tracked object, and after startup that is mostly these: in a
    busy web process each full pass holds the event loop long enough to be most of the ack
    time's tail, and under a long burst the heap grows again (a renderer and its queue per
    thread waiting for its turn), so full passes are also made rarer (measured:
    bench/README.md, "Why the store is built as it is"). Garbage in cycles waits longer for
    its pass; all else is freed at once, as ever. Called once per process after it started,
    never in library code: an object frozen here is never freed, even once unreachable.
    """
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_PASS_EVERY)
