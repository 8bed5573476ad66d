"""A process that starts a refund turn and exits once it parks, resumes a parked one, stops the
session (then waits to be SIGKILLed, having applied nothing), or only recovers what is left.

python -m tests.support.hitl_child URL start TURN
python -m tests.support.hitl_child URL resume TURN BY
python -m tests.support.hitl_child URL stop TURN BY
python -m tests.support.hitl_child URL recover TURN
"""

from __future__ import annotations

import asyncio
import sys

from agent import Runtime
from storage import SqlStore
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event


async def main(url: str, mode: str, turn_id: str, by: str | None) -> int:
    store = await SqlStore.open(url)
    agent = refund_agent()
    try:
        # The stopping process runs no turns, as a web process that only queues: the stop is
        # committed, and applying it is left to whichever worker picks the session up.
        runtime = Runtime(
            store,
            refund_model(),
            agent=agent,
            poll_interval=0.05,
            recovery_interval=0.1,
            run_turns=mode != "stop",
        )
        async with runtime:
            session = runtime.session(agent, "hitl:s")
            if mode == "start":
                await session.start(slack_event("refund order 42", user="U1"), turn_id=turn_id)
            elif mode == "resume":
                await session.resume(turn_id, "approve-refund", True, by=by)
            elif mode == "stop":
                stopped = await session.stop(by=by)
                print(f"STOPPED {' '.join(stopped)}", flush=True)
                await asyncio.sleep(600)  # the parent kills us here with SIGKILL
            async with asyncio.timeout(60):
                result = await session.result(turn_id)
            print(f"RESULT {result.status.value} {result.text}", flush=True)
    finally:
        await store.close()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(asyncio.run(main(args[0], args[1], args[2], args[3] if len(args) > 3 else None)))
