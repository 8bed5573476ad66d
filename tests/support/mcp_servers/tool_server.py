"""A real MCP server (the SDK's `MCPServer`) for the MCP tests, over stdio or streamable HTTP.

    python -m tests.support.mcp_servers.tool_server stdio|http --runs FILE [--variant V]

Tools: `lookup` (readOnlyHint), `record` (a write: appends one JSON line per execution to
`--runs`, fsynced, with the idempotency key it got in `_meta` and the `Idempotency-Key` header),
`fail` (a tool error), `slow` (sleeps: a hang), `big` (a long text), `junk` (an answer the client
must reject). `--variant extra` adds `extra_tool`, so the listing changes. `--hold-after-write`
makes `record` wait, after its line is fsynced, until the test kills the server. Over HTTP the
server binds 127.0.0.1 port 0 and prints `PORT <n>` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)


def build(runs: str, *, variant: str, hold_after_write: bool) -> MCPServer:
    server = MCPServer("test-tools")

    @server.tool(annotations=READ)
    def lookup(item: str) -> str:
        """Look an item up."""
        return f"{item}: in stock"

    @server.tool()
    async def record(note: str, ctx: Context) -> str:
        """Record a note (a write)."""
        meta = ctx.request_context.meta or {}
        headers = ctx.headers or {}
        line = {
            "note": note,
            "key": meta.get("idempotency_key"),
            "header": headers.get("idempotency-key"),
            "auth": headers.get("authorization"),
            "pid": os.getpid(),
        }
        with open(runs, "a") as f:  # noqa: ASYNC230 - fsynced before answering, on purpose
            f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())
        if hold_after_write:
            await asyncio.sleep(3600)
        return f"recorded {note}"

    @server.tool(annotations=READ)
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"cannot do that: {reason}")

    @server.tool(annotations=READ)
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return "done"

    @server.tool(annotations=READ)
    def big(size: int) -> str:
        """A long text."""
        return "x" * size

    @server.tool(annotations=READ)
    async def junk(ctx: Context) -> str:
        """Answers its own call with a malformed result first (stdio only): the client must
        take it as a protocol error, never as a result."""
        wrong = {"jsonrpc": "2.0", "id": ctx.request_context.request_id, "result": {"content": 7}}
        os.write(1, (json.dumps(wrong) + "\n").encode())
        await asyncio.sleep(0.2)
        return "the real answer, too late"

    if variant == "extra":

        @server.tool(annotations=READ)
        def extra_tool() -> str:
            """Only in the changed server."""
            return "extra"

    return server


async def serve_http(server: MCPServer) -> None:
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    # Listening before the port is announced: a client connecting while uvicorn still starts
    # waits in the backlog instead of being refused (on a busy machine it did connect first).
    sock.listen(128)
    app = server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await web.serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("transport", choices=["stdio", "http"])
    parser.add_argument("--runs", required=True)
    parser.add_argument("--variant", default="plain")
    parser.add_argument("--hold-after-write", action="store_true")
    args = parser.parse_args()
    server = build(args.runs, variant=args.variant, hold_after_write=args.hold_after_write)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        asyncio.run(serve_http(server))
    sys.exit(0)


if __name__ == "__main__":
    main()
