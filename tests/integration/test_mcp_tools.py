"""MCP servers' tools as the agent's, against the SDK's own server (`MCPServer`) run as a real
subprocess over stdio and over streamable HTTP on 127.0.0.1: reads run at once, writes are
proposed, confirmed and run once through a receipt with the idempotency key in `_meta` (and the
header the HTTP server documents); errors, hangs, big results and a server that is down are tool
errors or notes the model reads, never a stuck turn."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from agent import (
    Agent,
    ConfirmationStatus,
    ReceiptStatus,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolMessage,
    tool,
)
from agent.mcp import McpServer, attach_mcp
from agent.seams import ModelRequest
from tests.support import children
from tests.support.confirmations import approve_pending
from tests.support.mcp_servers.fixtures import (
    TOKEN,
    TOKEN_ENV,
    http_server,
    read_runs,
    stdio_server,
)

Declare = Callable[..., McpServer]


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)


@pytest.fixture(params=["stdio", "http"])
async def declare(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Declare]:
    """`declare(**fields)`: the test server over this transport, writing to tmp_path/runs."""
    runs = tmp_path / "runs.jsonl"
    if request.param == "stdio":
        yield lambda **kw: stdio_server(runs, **kw)
        return
    async with http_server(runs) as (server, _proc):
        yield lambda **kw: server.model_copy(update=kw)


def _model(*calls: ToolCall, seen: list[ModelRequest] | None = None) -> ScriptedModel:
    def respond(request: ModelRequest, step: int) -> ScriptedReply:
        if seen is not None:
            seen.append(request)
        if step < len(calls):
            return ScriptedReply(tool_calls=[calls[step]])
        return ScriptedReply(text="done")

    return ScriptedModel(responder=respond)


async def _agent(*servers: McpServer, tools: list[Any] | None = None) -> Agent:
    base = Agent(name="a", instructions="Help.", tools=tools or [], mcp_servers=servers)
    return await attach_mcp(base)


async def _results(store: SessionStore, key: str) -> list[ToolMessage]:
    return [m for m in await store.load_transcript(key) if isinstance(m, ToolMessage)]


def _rt(store: SessionStore, agent: Agent, model: ScriptedModel) -> Runtime:
    return Runtime(
        store,
        model,
        agent=agent,
        recovery_interval=0.05,
        poll_interval=0.02,
        secrets=agent.mcp.secrets if agent.mcp else (),
    )


async def _turn(store: SessionStore, agent: Agent, *calls: ToolCall) -> list[ToolMessage]:
    async with _rt(store, agent, _model(*calls)) as rt:
        await rt.session(agent, "s1").turn("go")
    return await _results(store, "s1")


async def test_read_tool_runs_at_once(store: SessionStore, declare: Declare) -> None:
    agent = await _agent(declare())
    try:
        lookup = agent.tool_named("srv__lookup")
        assert lookup is not None
        assert (lookup.effect, lookup.confirmation) == ("read", "none")
        [result] = await _turn(
            store, agent, ToolCall(id="c1", name="srv__lookup", input={"item": "widget"})
        )
        assert not result.is_error
        assert result.result == {"result": "widget: in stock"}
    finally:
        assert agent.mcp is not None
        await agent.mcp.close()


async def test_write_is_confirmed_then_runs_once_with_its_key(
    store: SessionStore, declare: Declare, tmp_path: Path
) -> None:
    agent = await _agent(declare())
    assert agent.mcp is not None
    record = agent.tool_named("srv__record")
    assert record is not None
    assert (record.effect, record.confirmation) == ("write", "required")
    call = ToolCall(id="w1", name="srv__record", input={"note": "hello"})
    try:
        async with _rt(store, agent, _model(call)) as rt:
            session = rt.session(agent, "s1")
            await session.turn("go")
            assert read_runs(tmp_path / "runs.jsonl") == [], "nothing runs before approval"
            [_pending] = await store.list_confirmations("s1", ConfirmationStatus.PENDING)
            [acted] = await approve_pending(session)
        runs = read_runs(tmp_path / "runs.jsonl")
        assert len(runs) == 1
        [receipt] = await store.list_receipts(session="s1")
        assert receipt.status == ReceiptStatus.COMPLETED
        assert receipt.key.startswith("srv__record:")
        assert runs[0]["key"] == f"s1/{receipt.key}"
        if agent.mcp_servers[0].url is not None:
            assert runs[0]["header"] == runs[0]["key"]
            assert runs[0]["auth"] == f"Bearer {TOKEN}"
        assert acted.status.value == "completed"
        assert (await _results(store, "s1"))[-1].result == {"result": "recorded hello"}
    finally:
        await agent.mcp.close()


async def test_allow_deny_and_names(store: SessionStore, tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    agent = await _agent(
        stdio_server(runs, name="one", allow=["lookup", "record", "fail"], deny=["fail"]),
        stdio_server(runs, name="two", deny=["record"]),
    )
    assert agent.mcp is not None
    try:
        names = [t.name for t in agent.tools]
        assert names[:2] == ["one__lookup", "one__record"]
        assert "two__record" not in names
        assert "two__lookup" in names
        assert agent.mcp.listed["one"] == ("one__lookup", "one__record")
    finally:
        await agent.mcp.close()


async def test_declared_read_only_overrides_the_annotation(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    plain = await _agent(stdio_server(runs))
    overridden = await _agent(stdio_server(runs, tools={"record": {"read_only": True}}))
    try:
        record = overridden.tool_named("srv__record")
        assert record is not None
        assert record.confirmation == "none"
        assert plain.fingerprint != overridden.fingerprint
    finally:
        for agent in (plain, overridden):
            assert agent.mcp is not None
            await agent.mcp.close()


async def test_a_tool_error_is_read_by_the_model(store: SessionStore, declare: Declare) -> None:
    agent = await _agent(declare())
    assert agent.mcp is not None
    try:
        [result] = await _turn(
            store, agent, ToolCall(id="c1", name="srv__fail", input={"reason": "no"})
        )
        assert result.is_error
        assert "the tool failed" in result.result["error"]
    finally:
        await agent.mcp.close()


async def test_a_hang_past_the_timeout_is_a_tool_error(
    store: SessionStore, declare: Declare
) -> None:
    agent = await _agent(declare(timeout=1))
    assert agent.mcp is not None
    try:
        async with asyncio.timeout(60):
            [result] = await _turn(
                store, agent, ToolCall(id="c1", name="srv__slow", input={"seconds": 120})
            )
        assert result.is_error
        assert "did not answer within 1s" in result.result["error"]
    finally:
        await agent.mcp.close()


async def test_a_big_result_is_cut_with_a_note(store: SessionStore, declare: Declare) -> None:
    agent = await _agent(declare(max_result_chars=1000))
    assert agent.mcp is not None
    try:
        [result] = await _turn(
            store, agent, ToolCall(id="c1", name="srv__big", input={"size": 5000})
        )
        assert not result.is_error
        assert isinstance(result.result, str)
        assert result.result.endswith("[truncated: 1000 of 5014 characters shown]")
    finally:
        await agent.mcp.close()


async def test_invalid_arguments_are_a_tool_error(store: SessionStore, tmp_path: Path) -> None:
    agent = await _agent(stdio_server(tmp_path / "runs.jsonl"))
    assert agent.mcp is not None
    try:
        [result] = await _turn(store, agent, ToolCall(id="c1", name="srv__lookup", input={}))
        assert result.is_error
        assert "'item' is a required property" in result.result["error"]
    finally:
        await agent.mcp.close()


@tool
def native_echo(text: str) -> str:
    """Echo."""
    return text


async def test_a_server_down_at_start_leaves_its_tools_out_and_tells_the_model(
    store: SessionStore, tmp_path: Path
) -> None:
    down = McpServer(name="down", command=sys.executable, args=["-c", "pass"], connect_timeout=20)
    http_down = McpServer(
        name="gone", url="http://127.0.0.1:9/mcp", headers={"Authorization": "${MCP_TEST_TOKEN}"}
    )
    agent = await _agent(down, http_down, tools=[native_echo])
    assert agent.mcp is not None
    assert [t.name for t in agent.tools] == ["native_echo"]
    assert set(agent.mcp.unavailable) == {"down", "gone"}
    assert all(TOKEN not in why for why in agent.mcp.unavailable.values())
    seen: list[ModelRequest] = []
    async with _rt(
        store, agent, _model(ToolCall(id="e", name="native_echo", input={"text": "hi"}), seen=seen)
    ) as rt:
        await rt.session(agent, "s1").turn("go")
    assert "down, gone could not be reached" in seen[0].system
    assert (await _results(store, "s1"))[-1].result == "hi"
    await agent.mcp.close()


async def test_a_changed_tool_list_changes_the_fingerprint(tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    before = await _agent(stdio_server(runs))
    again = await _agent(stdio_server(runs))
    after = await _agent(stdio_server(runs, variant="extra"))
    try:
        assert before.fingerprint == again.fingerprint
        assert after.fingerprint != before.fingerprint
        assert after.tool_named("srv__extra_tool") is not None
    finally:
        for agent in (before, again, after):
            assert agent.mcp is not None
            await agent.mcp.close()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_write_whose_server_dies_mid_call_is_uncertain_and_not_retried(
    store: SessionStore, transport: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.jsonl"
    if transport == "stdio":
        await _die_mid_call(store, stdio_server(runs, hold=True), runs)
    else:
        async with http_server(runs, hold=True) as (server, _proc):
            await _die_mid_call(store, server, runs)


async def _die_mid_call(store: SessionStore, server: McpServer, runs: Path) -> None:
    agent = await _agent(server)
    assert agent.mcp is not None
    call = ToolCall(id="w1", name="srv__record", input={"note": "once"})
    try:
        async with _rt(store, agent, _model(call)) as rt:
            session = rt.session(agent, "s1")
            await session.turn("go")
            approving = asyncio.create_task(approve_pending(session))
            async with asyncio.timeout(60):
                while not read_runs(runs):  # noqa: ASYNC110 - the server's file, not our state
                    await asyncio.sleep(0.05)
            os.kill(read_runs(runs)[0]["pid"], signal.SIGKILL)
            async with asyncio.timeout(60):
                await approving
        [receipt] = await store.list_receipts(session="s1")
        assert receipt.status == ReceiptStatus.UNCERTAIN
        last = (await _results(store, "s1"))[-1]
        assert last.is_error
        assert "EffectUncertainError" in last.result["error"]
        assert len(read_runs(runs)) == 1, "not retried"
        if server.command is not None:
            # the next call starts the server again: the connection is not left broken
            lookup = ToolCall(id="r1", name="srv__lookup", input={"item": "w"})
            async with _rt(store, agent, _model(lookup)) as rt:
                await rt.session(agent, "s2").turn("go")
            assert (await _results(store, "s2"))[-1].result == {"result": "w: in stock"}
    finally:
        await agent.mcp.close()


async def test_junk_from_the_server_is_a_tool_error(store: SessionStore) -> None:
    junk = McpServer(
        name="junk",
        command=sys.executable,
        args=["-m", "tests.support.mcp_servers.junk_server"],
        cwd=str(children.ROOT),
        env={"PYTHONPATH": str(children.ROOT)},
        timeout=5,
    )
    agent = await _agent(junk)
    assert agent.mcp is not None
    assert agent.mcp.unavailable == {}
    try:
        async with asyncio.timeout(60):
            [result] = await _turn(store, agent, ToolCall(id="c1", name="junk__junk", input={}))
        assert result.is_error
        assert result.result["error"].startswith("ToolError: MCP server 'junk'")
    finally:
        await agent.mcp.close()


async def test_a_write_that_hangs_past_the_timeout_is_uncertain(
    store: SessionStore, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.jsonl"
    agent = await _agent(stdio_server(runs, hold=True, timeout=2))
    assert agent.mcp is not None
    call = ToolCall(id="w1", name="srv__record", input={"note": "slow"})
    try:
        async with _rt(store, agent, _model(call)) as rt:
            session = rt.session(agent, "s1")
            await session.turn("go")
            async with asyncio.timeout(60):
                [acted] = await approve_pending(session)
        assert acted.status.value == "completed"
        [receipt] = await store.list_receipts(session="s1")
        assert receipt.status == ReceiptStatus.UNCERTAIN
        assert receipt.error is not None
        assert "did not answer within 2s" in receipt.error
        assert len(read_runs(runs)) == 1
    finally:
        await agent.mcp.close()
