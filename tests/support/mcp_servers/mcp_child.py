"""An engine process for the MCP crash test: an agent whose only tool is the test server's
`record` write (over stdio). It proposes the write, approves it (as the host would) and, with
`--crash-before-settle`, stops in the turn acting on the approval right after the server
answered and before the receipt commits, announcing `AT settle` so the parent can SIGKILL it.
`--recover-only` waits for that turn instead, as the next worker would.

    python -m tests.support.mcp_servers.mcp_child URL RUNS SESSION TURN [--crash-before-settle]
        [--recover-only]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from agent import (
    Agent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolMessage,
)
from agent.mcp import attach_mcp
from storage import SqlStore
from tests.support.effect_child import SettleHook, approve_and_finish
from tests.support.mcp_servers.fixtures import stdio_server


def _model() -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        if step == 0 and not any(isinstance(m, ToolMessage) for m in request.messages):
            return ScriptedReply(
                tool_calls=[ToolCall(id="w1", name="srv__record", input={"note": "crash"})]
            )
        last = request.messages[-1]
        if isinstance(last, ToolMessage) and last.is_error:
            return ScriptedReply(text=f"failed: {last.result['error'][:60]}")
        return ScriptedReply(text="done")

    return ScriptedModel(responder=respond)


async def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("url", "runs", "session", "turn"):
        parser.add_argument(name)
    parser.add_argument("--crash-before-settle", action="store_true")
    parser.add_argument("--recover-only", action="store_true")
    args = parser.parse_args()
    inner = await SqlStore.open(args.url)
    store = SettleHook(inner, args.crash_before_settle)
    base = Agent(name="m", instructions="x", mcp_servers=[stdio_server(Path(args.runs))])
    agent = await attach_mcp(base)
    assert agent.mcp is not None
    runtime = Runtime(
        store, _model(), agent=agent, lease_ttl=0.6, recovery_interval=0.1, poll_interval=0.05
    )
    try:
        result = await approve_and_finish(runtime, agent, store, args, "record it")
        print(f"RESULT {result.status.value} {result.text}", flush=True)
    finally:
        await agent.mcp.close()
        await inner.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
