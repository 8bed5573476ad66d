"""Declarations of the test MCP server (`tool_server.py`) over stdio and streamable HTTP, and
reading what its `record` tool wrote (one line per execution)."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent.mcp import McpServer
from tests.support import children

MODULE = "tests.support.mcp_servers.tool_server"
TOKEN_ENV = "MCP_TEST_TOKEN"
TOKEN = "sekrit-mcp-token-4711"


def stdio_server(
    runs: Path, *, name: str = "srv", variant: str = "plain", hold: bool = False, **kw: Any
) -> McpServer:
    args = ["-m", MODULE, "stdio", "--runs", str(runs), "--variant", variant]
    return McpServer(
        name=name,
        command=sys.executable,
        args=[*args, *(["--hold-after-write"] if hold else [])],
        cwd=str(children.ROOT),
        env={"PYTHONPATH": str(children.ROOT)},
        **kw,
    )


@asynccontextmanager
async def http_server(
    runs: Path, *, name: str = "srv", hold: bool = False, **kw: Any
) -> AsyncIterator[tuple[McpServer, children.Process]]:
    """The server as a child process on 127.0.0.1 (a port of its own choosing), declared with
    a bearer token from the environment and the `Idempotency-Key` header it documents."""
    extra = ["--hold-after-write"] if hold else []
    proc = await children.start(MODULE, "http", "--runs", str(runs), *extra)
    try:
        port = int((await children.wait_line(proc, "PORT ")).split()[1])
        yield (
            McpServer(
                name=name,
                url=f"http://127.0.0.1:{port}/mcp",
                headers={"Authorization": f"Bearer ${{{TOKEN_ENV}}}"},
                idempotency_header="Idempotency-Key",
                **kw,
            ),
            proc,
        )
    finally:
        if proc.returncode is None:
            await children.kill(proc)
        else:
            proc.close()


def read_runs(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
