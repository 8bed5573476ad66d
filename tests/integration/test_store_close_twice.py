"""Closing a store twice returns: a bot's close and its host's (a lifespan and a signal handler,
a fixture after the bot it opened) may both close it. The second close used to wait forever for
retired threads to take its jobs."""

from __future__ import annotations

import asyncio

from agent.seams import SessionStore, TurnInput


async def test_a_store_closed_twice_or_at_once_twice_returns(store: SessionStore) -> None:
    await store.enqueue_turn("s-close", "t1", TurnInput(text="hi"))
    await asyncio.wait_for(asyncio.gather(store.close(), store.close()), timeout=60)
    await asyncio.wait_for(store.close(), timeout=60)
