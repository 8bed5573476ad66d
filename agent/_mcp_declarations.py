"""Which MCP servers an agent uses: `mcp.json` in the agent directory and/or `mcp_servers=[...]`
in `agent.py`, checked when the agent is assembled.

    {"mcpServers": {
        "crm": {"url": "https://crm.example/mcp",
                "headers": {"Authorization": "Bearer ${CRM_TOKEN}"},
                "idempotency_header": "Idempotency-Key",
                "deny": ["delete_account"]},
        "files": {"command": "python", "args": ["-m", "files_server"],
                  "env": {"ROOT": "/srv/files"},
                  "tools": {"move": {"read_only": true}}}}}

Header and environment values may name environment variables as `${NAME}`; what they expand to
is a secret (a token, usually), so it is resolved only when the server is connected, never
stored in the declaration, and handed to the runtime's redactor.

Here, not in `agent.mcp`, so `Agent` can hold declarations without importing the MCP SDK (or
the adapter, which imports `Agent`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent._errors import AssemblyError

SERVER_NAME = r"^[a-zA-Z0-9_-]{1,24}$"
"""Short enough that `<server>__<tool>` leaves room in a 64-character tool name."""

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpAttachment(Protocol):
    """What an agent holds of its attached MCP servers (`agent.mcp.McpClients`): the values
    the declarations' `${VAR}`s expanded to (for the runtime's redactor), the servers that could
    not be reached at assembly (name → why), and how to close their sessions."""

    secrets: tuple[str, ...]
    unavailable: dict[str, str]

    async def close(self) -> None: ...


class McpToolRule(BaseModel):
    """What the declaration says of one of the server's tools, over what the server says.

    `read_only` overrides the tool's `readOnlyHint` (True: a read, run without confirmation;
    False: a write however the server annotates it). An override is logged at assembly: the
    classification never changes silently. `timeout` (seconds) replaces the server's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    read_only: bool | None = None
    timeout: float | None = Field(default=None, gt=0)


class McpServer(BaseModel):
    """One MCP server: streamable HTTP (`url`, `headers`) or stdio (`command`, `args`, `env`).

    `allow` (None: every tool) and `deny` filter the server's tools by their own names;
    `timeout` bounds each call (a server that hangs past it is a tool error, never a stuck
    turn); `idempotency_header` names the HTTP header the server documents for idempotency
    keys (sent with each write, besides `_meta`); results past `max_result_chars` are cut with
    a note to the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)
    tools: dict[str, McpToolRule] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0)
    connect_timeout: float = Field(default=20.0, gt=0)
    idempotency_header: str | None = None
    max_result_chars: int = Field(default=20_000, ge=100)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.url is None) == (self.command is None):
            raise ValueError("give either url (streamable HTTP) or command (stdio), not both")
        if self.command is not None and (self.headers or self.idempotency_header):
            raise ValueError("headers and idempotency_header are for HTTP servers (url)")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for stdio servers (command)")
        return self

    @property
    def transport(self) -> str:
        return "http" if self.url is not None else "stdio"

    def allows(self, tool: str) -> bool:
        return (self.allow is None or tool in self.allow) and tool not in self.deny


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A declaration's `${NAME}` values expanded from the environment, and those values (the
    secrets the redactor must know)."""

    headers: dict[str, str]
    env: dict[str, str]
    secrets: tuple[str, ...]


def resolve(server: McpServer, environ: Mapping[str, str] | None = None) -> Resolved:
    """Expand `${NAME}` in headers and env; a missing variable is an `AssemblyError` naming it
    (never its would-be value). Every expanded value counts as a secret, and so does each
    header value whole (`Bearer <token>`)."""
    source = os.environ if environ is None else environ
    found: list[str] = []

    def expand(text: str, where: str) -> str:
        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in source:
                raise AssemblyError(
                    f"MCP server {server.name!r}: {where} names ${{{name}}}, which is not set"
                )
            found.append(source[name])
            return source[name]

        return _VARIABLE.sub(one, text)

    headers = {k: expand(v, f"header {k}") for k, v in server.headers.items()}
    env = {k: expand(v, f"env {k}") for k, v in server.env.items()}
    secrets = [*found, *(v for k, v in headers.items() if server.headers[k] != v)]
    return Resolved(headers=headers, env=env, secrets=tuple(s for s in dict.fromkeys(secrets) if s))


def read_mcp_json(path: Path) -> tuple[McpServer, ...]:
    """`mcp.json`: `{"mcpServers": {name: declaration}}`; absent → no servers. A malformed file
    is an `AssemblyError` naming each wrong field."""
    if not path.is_file():
        return ()
    try:
        body = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise AssemblyError(f"{path}: not JSON ({err.msg}, line {err.lineno})") from None
    servers = body.get("mcpServers") if isinstance(body, dict) else None
    if not isinstance(servers, dict) or set(body) != {"mcpServers"}:
        raise AssemblyError(f'{path}: expected {{"mcpServers": {{name: server, ...}}}}')
    return servers_of(
        [{"name": name, **(v if isinstance(v, dict) else {})} for name, v in servers.items()],
        where=str(path),
    )


def servers_of(
    values: Iterable[McpServer | Mapping[str, Any]], *, where: str
) -> tuple[McpServer, ...]:
    """Declarations as given (models or dicts), checked: names unique, fields valid."""
    out: list[McpServer] = []
    for value in values:
        try:
            server = value if isinstance(value, McpServer) else McpServer(**dict(value))
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'server'}: {e['msg']}"
                for e in err.errors()
            )
            name = value.get("name") if isinstance(value, Mapping) else None
            raise AssemblyError(f"{where}: MCP server {name!r}: {problems}") from None
        if any(s.name == server.name for s in out):
            raise AssemblyError(f"{where}: two MCP servers are named {server.name!r}")
        out.append(server)
    return tuple(out)
