"""MCP servers' tools as the agent's tools (the official `mcp` SDK; stdio and streamable HTTP).

Declare servers in `mcp.json` beside `agent.py` or as `mcp_servers = [...]` in it (see
`McpServer`), then `agent = await attach_mcp(load_agent(path))`; close `agent.mcp` with the
runtime. How a server should honour the idempotency key of a write: docs/mcp.md.
"""

from agent._mcp_declarations import McpServer, McpToolRule, read_mcp_json
from agent.mcp._attach import McpClients, attach_mcp
from agent.mcp._connection import IDEMPOTENCY_META_KEY, McpConnection
from agent.mcp._remote_tools import McpTool, tool_name

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "McpClients",
    "McpConnection",
    "McpServer",
    "McpTool",
    "McpToolRule",
    "attach_mcp",
    "read_mcp_json",
    "tool_name",
]
