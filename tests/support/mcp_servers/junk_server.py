"""A stdio "MCP server" that shakes hands and lists one tool properly, then answers every
`tools/call` with a result no MCP client may accept (`content` is not a list): the junk a broken
or hostile server sends. Written by hand, since the SDK's server cannot be made to send it.

    python -m tests.support.mcp_servers.junk_server
"""

from __future__ import annotations

import json
import sys
from typing import Any

TOOL = {
    "name": "junk",
    "description": "Answers with junk.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    method = request.get("method")
    if "id" not in request:
        return None  # a notification
    if method == "initialize":
        result: Any = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "junk", "version": "0"},
        }
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        result = {"content": 7, "isError": "maybe"}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "?"}}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
