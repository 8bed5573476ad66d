"""The bot's own start: `open_bot` lists the agent's MCP servers' tools, hands the values their
declarations expanded to the runtime's redactor, and closes the sessions when it closes."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from pydantic import SecretStr

from agent import Agent, ScriptedModel, ScriptedReply
from agent.mcp import McpClients
from bot.app import open_bot
from bot.core.logs import setup_logging
from bot.core.settings import Settings
from bot.testing import SlackStandIn
from tests.support.mcp_servers.fixtures import TOKEN, TOKEN_ENV, stdio_server


async def test_open_bot_attaches_the_servers_and_scrubs_their_secrets(
    sql_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    server = stdio_server(tmp_path / "runs.jsonl").model_copy(
        update={"env": {"PYTHONPATH": str(Path.cwd()), "X_TOKEN": f"${{{TOKEN_ENV}}}"}}
    )
    agent = Agent(name="a", instructions="x", mcp_servers=[server])
    standin = await SlackStandIn().start()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    buffer = io.StringIO()
    setup_logging(level="INFO", stream=buffer)  # as every command does, before the agent loads
    try:
        settings = Settings(
            DATABASE_URL=sql_url,
            SLACK_BOT_TOKEN=SecretStr("xoxb-test-token-123456"),
            SLACK_SIGNING_SECRET=SecretStr("test-signing-secret"),
            SLACK_API_URL=standin.api_url,
        )
        bot = await open_bot(settings, agent=agent, model=ScriptedModel([ScriptedReply(text="k")]))
        try:
            assert bot.agent.tool_named("srv__lookup") is not None
            assert isinstance(bot.agent.mcp, McpClients)
            assert TOKEN in bot.agent.mcp.secrets
            assert TOKEN not in bot.runtime.redact(f"error: {TOKEN} leaked")
            logging.getLogger("bot.test").warning("a server said %s", TOKEN)
        finally:
            await bot.close()
        connection = bot.agent.mcp.connections["srv"]
        assert await connection.list_tools()  # a closed session is opened again on demand
        await bot.agent.mcp.close()
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        await standin.stop()
    assert "a server said" in buffer.getvalue()
    assert TOKEN not in buffer.getvalue()  # the log filter learnt the server's secret too
