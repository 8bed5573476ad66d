"""`bot check` with MCP servers declared in the agent directory's `mcp.json`: a server whose
tool list changed under a parked turn changes the agent's fingerprint, so the turn is reported;
a server that cannot be reached is reported; both exit 1. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agent import Runtime, ScriptedModel, ScriptedReply, ToolCall, TurnStatus, load_agent
from agent.mcp import attach_mcp
from tests.support import children
from tests.support.hitl_fixtures import slack_event
from tests.support.mcp_servers.fixtures import MODULE


def _agent_dir(root: Path, runs: Path, *, variant: str = "plain", down: bool = False) -> Path:
    (root / "tools").mkdir(parents=True, exist_ok=True)
    (root / "instructions.md").write_text("ops")
    (root / "tools" / "ask.py").write_text(
        "from agent import tool, ToolContext\n\n"
        "@tool\nasync def ask(ctx: ToolContext) -> str:\n"
        '    """Ask."""\n'
        "    return str(await ctx.request_input(id='ok', prompt='ok?'))\n"
    )
    servers: dict[str, Any] = {
        "srv": {
            "command": sys.executable,
            "args": ["-m", MODULE, "stdio", "--runs", str(runs), "--variant", variant],
            "cwd": str(children.ROOT),
            "env": {"PYTHONPATH": str(children.ROOT)},
        }
    }
    if down:
        servers["down"] = {"command": sys.executable, "args": ["-c", "pass"]}
    (root / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return root


async def _check(url: str, root: Path) -> children.Ran:
    return await children.run(
        "bot.cli.main", "check", "--database-url", url, "--agent-dir", str(root)
    )


async def test_check_reports_changed_and_unreachable_mcp_servers(
    sql_store: Any, sql_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.jsonl"
    root = _agent_dir(tmp_path / "agent", runs)
    agent = await attach_mcp(load_agent(root))
    assert agent.mcp is not None
    assert agent.tool_named("srv__lookup") is not None
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={})]),
            ScriptedReply(text="k"),
        ]
    )
    try:
        async with Runtime(sql_store, model, agent=agent, poll_interval=0.02) as rt:
            session = rt.session(agent, "s1")
            await session.start(slack_event("hi"), turn_id="T1")
            assert (await session.result("T1")).status == TurnStatus.SUSPENDED
    finally:
        await agent.mcp.close()

    same = await _check(sql_url, root)
    assert (same.returncode, same.stdout.strip()) == (0, "ok"), same.stderr

    _agent_dir(root, runs, variant="extra")
    changed = await _check(sql_url, root)
    assert changed.returncode == 1
    assert "s1 turn=T1" in changed.stdout
    assert "1 turn(s) under a different agent fingerprint" in changed.stdout

    _agent_dir(root, runs, down=True)
    down = await _check(sql_url, root)
    assert down.returncode == 1
    assert "mcp server down: unavailable" in down.stdout
    assert "1 MCP server(s) unavailable" in down.stdout
