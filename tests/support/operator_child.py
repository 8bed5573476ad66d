"""A worker process for the operator command tests: it runs whatever turns the test queues on
the database (found by its recovery sweep, as `bot worker` finds a web process's turns), until
it is killed. A turn opened with "slow" calls a tool that waits until the turn is cancelled
(it announces `SLOW <turn>` first); one opened with "ask" parks for U1's approval; "hello"
answers at once.

    python -m tests.support.operator_child URL
"""

from __future__ import annotations

import asyncio
import sys

from agent import Agent, Runtime, ScriptedModel, ScriptedReply, ToolCall, ToolContext, tool
from storage import SqlStore


@tool
async def slow(ctx: ToolContext) -> dict[str, bool]:
    """Work that takes as long as nobody stops it."""
    sys.stdout.write(f"SLOW {ctx.turn_id}\n")
    sys.stdout.flush()
    await asyncio.wait_for(ctx.cancellation.wait(), 300)
    return {"stopped": True}


@tool
async def ask(ctx: ToolContext) -> str:
    """Ask U1 before going on."""
    answer = await ctx.request_input(id="go", prompt="Go ahead?", answerers={"user": "U1"})
    return str(answer)


AGENT = Agent(name="operated", instructions="Do as told.", tools=[slow, ask])
MODEL = ScriptedModel(
    by_opening={
        "slow": [
            ScriptedReply(text="Working.", tool_calls=[ToolCall(id="s1", name="slow", input={})]),
            ScriptedReply(text="MODEL CALLED AFTER THE SLOW TOOL"),
        ],
        "ask": [
            ScriptedReply(text="Asking.", tool_calls=[ToolCall(id="a1", name="ask", input={})]),
            ScriptedReply(text="Went ahead."),
        ],
        "hello": [ScriptedReply(text="Hi.")],
    },
    keep_requests=False,
)


async def main(url: str) -> int:
    store = await SqlStore.open(url)
    try:
        # A short lease: its heartbeat, which reads a cancel another process committed (there
        # is no Redis here), comes every third of it.
        runtime = Runtime(
            store, MODEL, agent=AGENT, lease_ttl=3.0, recovery_interval=0.1, poll_interval=0.05
        )
        async with runtime:
            sys.stdout.write("READY\n")
            sys.stdout.flush()
            await asyncio.sleep(3600)  # the test kills us
    finally:
        await store.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
