"""Operator commands over a real database: `bot receipts list/resolve` and `bot check`, plus
what happens when a parked turn's tool disappeared from the agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import (
    Agent,
    ReceiptStatus,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    TurnStatus,
    load_agent,
    tool,
)
from tests.support import children
from tests.support.confirmations import turn_and_approve
from tests.support.hitl_fixtures import slack_event


async def _bot(*args: str) -> children.Ran:
    return await children.run("bot.cli.main", *args)


@tool(effect="write", confirmation="required")
async def pay(order: str, ctx: ToolContext) -> Any:
    """Charge (the gateway times out)."""

    async def charge(authority: Any) -> Any:
        raise TimeoutError("gateway timeout")

    return (await ctx.run_effect(order, charge)).value


async def test_receipts_list_and_resolve(sql_store: Any, sql_url: str) -> None:
    agent = Agent(name="a", instructions="x", tools=[pay])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="p", name="pay", input={"order": "o-9"})]),
            ScriptedReply(text="uncertain"),
        ]
    )
    async with Runtime(sql_store, model, agent=agent, poll_interval=0.02) as rt:
        await turn_and_approve(rt.session(agent, "ops:1"), "pay o-9")

    listed = await _bot("receipts", "list", "--status", "uncertain", "--database-url", sql_url)
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.startswith("uncertain")
    assert "ops:1  pay:o-9" in line
    assert "TimeoutError: gateway timeout" in line
    as_json = await _bot(
        "receipts", "list", "--status", "uncertain", "--json", "--database-url", sql_url
    )
    [record] = [json.loads(text) for text in as_json.stdout.splitlines()]
    assert (record["session"], record["key"], record["status"]) == ("ops:1", "pay:o-9", "uncertain")
    assert "TimeoutError: gateway timeout" in record["error"]
    assert record["created_at"].endswith("+00:00")

    observed = json.dumps({"charge": "ch_1"})
    resolved = await _bot(
        "receipts", "resolve", "ops:1", "pay:o-9", "--completed", "--value", observed,
        "--database-url", sql_url,
    )  # fmt: skip
    assert resolved.returncode == 0, resolved.stderr
    assert resolved.stdout.strip() == "pay:o-9: completed"
    receipt = await sql_store.get_receipt("ops:1", "pay:o-9")
    assert (receipt.status, receipt.value) == (ReceiptStatus.COMPLETED, {"charge": "ch_1"})
    again = await _bot(
        "receipts", "resolve", "ops:1", "pay:o-9", "--failed", "--database-url", sql_url
    )
    _one_line(again, "receipts resolve")  # only an uncertain receipt can be resolved


def _one_line(done: children.Ran, command: str) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"bot {command}: "), line
    return line


async def test_receipts_resolve_refuses_what_it_cannot_apply(sql_url: str) -> None:
    """A value that is not JSON is a usage error (argparse's, exit 2); a value with --failed,
    or a receipt that does not exist, one line on stderr, exit 2; never a traceback."""
    resolve = ("receipts", "resolve", "ops:1", "pay:o-9", "--database-url", sql_url)
    not_json = await _bot(*resolve, "--completed", "--value", "{charge: ch_1}")
    assert not_json.returncode == 2
    assert "Traceback" not in not_json.stderr
    assert "argument --value: '{charge: ch_1}' is not JSON" in not_json.stderr
    with_value = await _bot(*resolve, "--failed", "--value", '"ch_1"')
    assert "--failed takes no --value" in _one_line(with_value, "receipts resolve")
    assert with_value.stdout == ""
    missing = await _bot(*resolve, "--completed")
    assert "no receipt 'pay:o-9' on session 'ops:1'" in _one_line(missing, "receipts resolve")


def _agent_dir(root: Path, with_tool: bool) -> Path:
    (root / "tools").mkdir(parents=True, exist_ok=True)
    (root / "instructions.md").write_text("ops")
    tool_file = root / "tools" / "ask.py"
    if with_tool:
        tool_file.write_text(
            "from agent import tool, ToolContext\n\n"
            "@tool\nasync def ask(ctx: ToolContext) -> str:\n"
            '    """Ask."""\n'
            "    return str(await ctx.request_input(id='ok', prompt='ok?'))\n"
        )
    elif tool_file.exists():
        tool_file.unlink()
    return root


async def test_check_reports_a_parked_turn_whose_tool_is_gone(
    sql_store: Any, sql_url: str, tmp_path: Path
) -> None:
    root = _agent_dir(tmp_path / "agent", with_tool=True)
    agent = load_agent(root)
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="q", name="ask", input={})]),
            ScriptedReply(text="k"),
        ]
    )
    async with Runtime(sql_store, model, agent=agent, poll_interval=0.02) as rt:
        session = rt.session(agent, "s1")
        await session.start(slack_event("hi"), turn_id="T1")
        assert (await session.result("T1")).status == TurnStatus.SUSPENDED

    ok = await _bot("check", "--database-url", sql_url, "--agent-dir", str(root))
    assert (ok.returncode, ok.stdout.strip()) == (0, "ok")

    _agent_dir(root, with_tool=False)
    changed = await _bot("check", "--database-url", sql_url, "--agent-dir", str(root))
    assert changed.returncode == 1
    assert "s1 turn=T1" in changed.stdout
    assert "parked in tool 'ask', which the agent no longer has" in changed.stdout

    # and resuming it fails clearly instead of misbehaving
    new_agent = load_agent(root)
    async with Runtime(sql_store, model, agent=new_agent, poll_interval=0.02) as rt:
        session = rt.session(new_agent, "s1")
        await session.resume("T1", "ok", True, by="U1")
        result = await session.result("T1")
    assert result.status == TurnStatus.FAILED
    assert result.error is not None
    assert "no longer offers" in result.error


async def _bot_with(env: dict[str, str], *args: str) -> children.Ran:
    return await children.run("bot", *args, env=env)


UNREACHABLE = "postgresql+psycopg://agent:s3cret-pw@127.0.0.1:1/nowhere"
"""PostgreSQL on a closed port: every connection is refused."""

COMMANDS = {
    "worker": ["worker"],
    "clock": ["clock"],
    "serve": ["serve"],
    "socket": ["socket"],
    "demo": ["demo", "--database-url", "{url}"],
    "demo --engine": ["demo", "--engine", "--database-url", "{url}"],
    "db upgrade": ["db", "upgrade"],
    "db current": ["db", "current"],
    "receipts list": ["receipts", "list"],
    "receipts resolve": ["receipts", "resolve", "s1", "tool:key", "--failed"],
    "check": ["check"],
    "approvals": ["approvals"],
    "turns": ["turns", "--stuck"],
    "cancel": ["cancel", "slack:T1:C1:1.000001"],
    "reset": ["reset", "slack:T1:C1:1.000001"],
}
"""Every command, each the way an operator would start it (the demos only touch the database
they are given)."""


async def _against(url: str, command: str) -> children.Ran:
    env = {
        "DATABASE_URL": url,
        "SLACK_BOT_TOKEN": "xoxb-test-token-0000",
        "SLACK_SIGNING_SECRET": "signing-secret-0000",
        "SLACK_APP_TOKEN": "xapp-test-token-0000",
        "ANTHROPIC_API_KEY": "sk-ant-test-key-0000",
        "LOG_FORMAT": "text",
    }
    return await _bot_with(env, *(arg.format(url=url) for arg in COMMANDS[command]))


def _one_clear_line(done: children.Ran, command: str) -> str:
    assert done.returncode == 2, (command, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    name = command.removesuffix(" --engine")
    assert lines[0].startswith(f"bot {name}: cannot reach the database "), lines[0]
    return lines[0]


@pytest.mark.parametrize("command", list(COMMANDS))
async def test_a_command_against_an_unreachable_database_says_so_in_one_line(command: str) -> None:
    """An operator who mistyped DATABASE_URL, or whose database is down, gets one line naming
    the database (its password hidden) and why, not a traceback, and exit code 2."""
    done = await _against(UNREACHABLE, command)
    line = _one_clear_line(done, command)
    assert "s3cret-pw" not in done.stderr + done.stdout
    assert "postgresql+psycopg://agent:***@127.0.0.1:1/nowhere" in line
    assert "refused" in line.lower()


@pytest.mark.parametrize("command", ["worker", "db upgrade", "receipts list", "demo --engine"])
async def test_a_sqlite_database_that_cannot_be_opened_says_so_in_one_line(
    command: str, tmp_path: Path
) -> None:
    """SQLite's "unreachable": a path whose directory cannot exist (a file is in the way)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    url = f"sqlite+aiosqlite:///{blocker}/bot.db"
    line = _one_clear_line(await _against(url, command), command)
    assert f"{blocker}/bot.db" in line
