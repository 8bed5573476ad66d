"""Assembly: connect each declared MCP server, list its tools and add them to the agent.

Listing needs the network, so it is async and separate from `load_agent` (which only reads the
declarations): `agent = await attach_mcp(load_agent(path))`. The tools listed are part of the
agent's fingerprint, so a server whose tools changed under a parked turn shows in `bot check`.
A server that cannot be reached leaves its tools out, is logged, is listed in
`McpClients.unavailable` (for `bot check`), and the model is told in the instructions; the rest
of the agent works.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Mapping

from agent._agent_def import Agent
from agent._errors import AssemblyError
from agent._mcp_declarations import McpServer, resolve
from agent.mcp._connection import McpConnection, ServerUnavailableError, _describe
from agent.mcp._remote_tools import McpTool, make_mcp_tool

log = logging.getLogger(__name__)


@dataclasses.dataclass(kw_only=True)
class McpClients:
    """The agent's MCP connections (one per server), what could not be reached, and the
    secrets their declarations expanded (for the runtime's redactor: `Runtime(secrets=...)`)."""

    connections: dict[str, McpConnection] = dataclasses.field(default_factory=dict)
    unavailable: dict[str, str] = dataclasses.field(default_factory=dict)
    """Server name → why it could not be reached or listed at assembly."""
    listed: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    """Server name → the agent's tool names taken from it."""
    secrets: tuple[str, ...] = ()

    async def close(self) -> None:
        """Close every session (stdio servers' processes end with theirs)."""
        for connection in self.connections.values():
            try:
                await connection.close()
            except Exception as exc:
                log.warning(
                    "MCP server %s: close failed (%s)", connection.server.name, _describe(exc)
                )


def unavailable_note(unavailable: Mapping[str, str]) -> str:
    names = ", ".join(sorted(unavailable))
    return (
        f"Note: the tool server(s) {names} could not be reached when this assistant started; "
        "their tools are not available. Say so if a request needs them."
    )


async def attach_mcp(agent: Agent, *, environ: Mapping[str, str] | None = None) -> Agent:
    """The agent with its declared MCP servers' tools (`agent.mcp_servers`), and its
    `mcp` clients set. An agent without servers is returned as it is.

    A missing `${VAR}` in a declaration is an `AssemblyError`, as any misdeclaration is; a
    server that is down is not (the bot still starts)."""
    if not agent.mcp_servers:
        return agent
    clients = McpClients()
    secrets: list[str] = []
    for server in agent.mcp_servers:
        resolved = resolve(server, environ)
        secrets.extend(resolved.secrets)
        clients.connections[server.name] = McpConnection(server, resolved)
    clients.secrets = tuple(dict.fromkeys(secrets))
    listings = await asyncio.gather(
        *(_list(server, clients.connections[server.name]) for server in agent.mcp_servers)
    )
    added: list[McpTool] = []
    taken = {t.name for t in agent.tools}
    for server, tools in zip(agent.mcp_servers, listings, strict=True):
        if isinstance(tools, str):
            clients.unavailable[server.name] = tools
            log.warning(
                "MCP server %s is unavailable, its tools are absent: %s", server.name, tools
            )
            continue
        names: list[str] = []
        for tool in tools:
            if tool.name in taken:
                raise AssemblyError(
                    f"agent {agent.name!r}: MCP tool {tool.remote_name!r} of {server.name!r} "
                    f"would be named {tool.name!r}, which another tool has"
                )
            taken.add(tool.name)
            names.append(tool.name)
            added.append(tool)
        clients.listed[server.name] = tuple(names)
    instructions = agent.instructions
    if clients.unavailable:
        instructions = f"{instructions.rstrip()}\n\n{unavailable_note(clients.unavailable)}\n"
    return dataclasses.replace(
        agent, tools=[*agent.tools, *added], instructions=instructions, mcp=clients
    )


async def _list(server: McpServer, connection: McpConnection) -> list[McpTool] | str:
    """The server's allowed tools, or why they could not be listed."""
    try:
        listed = await connection.list_tools()
    except ServerUnavailableError as err:
        return str(err)
    except Exception as exc:
        await connection.close()
        return _describe(exc)
    return [
        make_mcp_tool(server, connection, tool)
        for tool in sorted(listed, key=lambda t: t.name)
        if server.allows(tool.name)
    ]
