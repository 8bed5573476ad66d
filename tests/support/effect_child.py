"""An engine process for the FAN-7 crash steps: it runs the reservation turn, approves the
reservation it proposes (as the host would) and, with `--crash-before-settle`, stops in the turn
acting on the approval right after the provider answered and before the receipt commits,
announcing it on stdout so the parent can SIGKILL it there. `--recover-only` waits for that turn.

    python -m tests.support.effect_child URL SERVICE_URL SESSION TURN [--crash-before-settle]
        [--recover-only] [--reconcile]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from agent import Agent, ConfirmationStatus, Runtime, TurnResult
from storage import SqlStore
from tests.support.effect_fixtures import fan_agent, fan_model


class SettleHook:
    """The store, frozen before a receipt settles when `crash` (shared with the MCP child)."""

    def __init__(self, inner: Any, crash: bool) -> None:
        self._inner = inner
        self._crash = crash

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def settle_receipt(self, *args: Any, **kwargs: Any) -> Any:
        if self._crash:
            print("AT settle", flush=True)
            time.sleep(600)  # noqa: ASYNC251 - freeze here until the parent SIGKILLs us
        return await self._inner.settle_receipt(*args, **kwargs)


async def approve_and_finish(
    runtime: Runtime, agent: Agent, store: Any, args: argparse.Namespace, opening: str
) -> TurnResult:
    """Start the turn whose write is proposed and approve it, as a host would (unless
    `--recover-only`: the approved turn is already there), and wait for the approved turn."""
    async with runtime:
        session = runtime.session(agent, args.session)
        async with asyncio.timeout(60):
            if not args.recover_only:
                await session.start(opening, turn_id=args.turn)
                await session.result(args.turn)
                [proposed] = await store.list_confirmations(
                    args.session, ConfirmationStatus.PENDING
                )
                await session.confirm(proposed.confirmation_id, True)
            [approved] = await store.list_confirmations(args.session, ConfirmationStatus.ACCEPTED)
            assert approved.follow_up_turn is not None
            return await session.result(approved.follow_up_turn)


async def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("url", "service_url", "session", "turn"):
        parser.add_argument(name)
    parser.add_argument("--crash-before-settle", action="store_true")
    parser.add_argument("--recover-only", action="store_true")
    parser.add_argument("--reconcile", action="store_true")
    args = parser.parse_args()
    inner = await SqlStore.open(args.url)
    store = SettleHook(inner, args.crash_before_settle)
    agent = fan_agent(args.service_url, timeout=5, reconcile=args.reconcile)
    runtime = Runtime(
        store, fan_model(), agent=agent, lease_ttl=0.6, recovery_interval=0.1, poll_interval=0.05
    )
    try:
        result = await approve_and_finish(
            runtime, agent, store, args, "reserve two FILTER-A for FAN-7"
        )
        print(f"RESULT {result.status.value} {result.text}", flush=True)
    finally:
        await inner.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
