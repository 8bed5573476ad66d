"""Declaring MCP servers: `mcp.json` and `mcp_servers` in agent.py, checked at assembly; `${VAR}`
values resolved from the environment and kept as secrets; per-source `deny_tools` naming a
server's tools; tool names valid for the model's API."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from agent import AssemblyError, load_agent
from agent._mcp_declarations import resolve
from agent.mcp import McpServer, attach_mcp, tool_name
from tests.support.mcp_servers.fixtures import stdio_server


def _dir(root: Path, servers: dict[str, object], agent_py: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "instructions.md").write_text("x")
    (root / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    if agent_py:
        (root / "agent.py").write_text(agent_py)
    return root


def test_mcp_json_and_agent_py_declare_servers(tmp_path: Path) -> None:
    root = _dir(
        tmp_path / "a",
        {"crm": {"url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "${CRM_KEY}"}}},
        agent_py=(
            "from agent.mcp import McpServer\n"
            "mcp_servers = [McpServer(name='files', command='python', args=['-m', 'x'])]\n"
        ),
    )
    agent = load_agent(root)
    assert [(s.name, s.transport) for s in agent.mcp_servers] == [
        ("crm", "http"),
        ("files", "stdio"),
    ]


@pytest.mark.parametrize(
    ("servers", "says"),
    [
        ({"x": {"url": "http://h/mcp", "command": "python"}}, "either url"),
        ({"x": {}}, "either url"),
        ({"x": {"command": "python", "headers": {"A": "b"}}}, "for HTTP servers"),
        ({"bad name": {"command": "python"}}, "name"),
        ({"x": {"command": "python", "tools": {"t": {"read_only": "maybe"}}}}, "read_only"),
    ],
)
def test_a_misdeclared_server_is_an_assembly_error(
    tmp_path: Path, servers: dict[str, object], says: str
) -> None:
    with pytest.raises(AssemblyError, match=says):
        load_agent(_dir(tmp_path / "a", servers))


def test_one_name_in_both_places_is_an_assembly_error(tmp_path: Path) -> None:
    root = _dir(
        tmp_path / "a",
        {"files": {"command": "python"}},
        agent_py="mcp_servers = [{'name': 'files', 'command': 'python'}]\n",
    )
    with pytest.raises(AssemblyError, match="two MCP servers are named 'files'"):
        load_agent(root)


def test_malformed_mcp_json(tmp_path: Path) -> None:
    root = _dir(tmp_path / "a", {})
    (root / "mcp.json").write_text("{nope")
    with pytest.raises(AssemblyError, match="not JSON"):
        load_agent(root)
    (root / "mcp.json").write_text('{"servers": {}}')
    with pytest.raises(AssemblyError, match="mcpServers"):
        load_agent(root)


def test_variables_resolve_from_the_environment_as_secrets() -> None:
    server = McpServer(
        name="crm",
        url="http://127.0.0.1:1/mcp",
        headers={"Authorization": "Bearer ${CRM_TOKEN}", "X-Plain": "plain"},
    )
    resolved = resolve(server, {"CRM_TOKEN": "t0ken-value"})
    assert resolved.headers == {"Authorization": "Bearer t0ken-value", "X-Plain": "plain"}
    assert set(resolved.secrets) == {"t0ken-value", "Bearer t0ken-value"}
    assert "t0ken" not in repr(server)
    with pytest.raises(AssemblyError, match=r"names \$\{CRM_TOKEN\}, which is not set"):
        resolve(server, {})


async def test_a_missing_variable_fails_attach(tmp_path: Path) -> None:
    server = McpServer(name="crm", url="http://127.0.0.1:1/mcp", headers={"A": "${NOPE_VAR}"})
    agent = load_agent(_dir(tmp_path / "a", {}))
    with pytest.raises(AssemblyError, match="NOPE_VAR"):
        await attach_mcp(agent.__class__(name="a", instructions="x", mcp_servers=[server]))


async def test_a_surface_may_deny_a_server_tool(tmp_path: Path) -> None:
    root = _dir(
        tmp_path / "a",
        {
            "srv": stdio_server(tmp_path / "runs.jsonl").model_dump(
                exclude={"name"}, exclude_defaults=True
            )
        },
        agent_py="surfaces = {'api': {'deny_tools': ['srv__record']}}\n",
    )
    agent = await attach_mcp(load_agent(root))
    assert agent.mcp is not None
    try:
        assert "srv__record" in agent.policy_for("slack").tools
        assert "srv__record" not in agent.policy_for("api").tools
        assert "srv__lookup" in agent.policy_for("api").tools
    finally:
        await agent.mcp.close()
    (root / "agent.py").write_text("surfaces = {'api': {'deny_tools': ['other__x']}}\n")
    with pytest.raises(AssemblyError, match="denies unknown tools"):
        load_agent(root)


def test_tool_names_fit_the_model_api() -> None:
    assert tool_name("crm", "find.customer") == "crm__find_customer"
    long = tool_name("s" * 24, "t" * 80)
    assert len(long) == 64
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", long)


def test_stdio_declaration_round_trips() -> None:
    server = McpServer(name="x", command=sys.executable)
    assert server.allows("anything")
    assert not server.model_copy(update={"deny": ["a"]}).allows("a")
