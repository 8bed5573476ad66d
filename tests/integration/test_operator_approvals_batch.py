"""`bot approvals` (a subprocess of `bot.cli.main`, on SQLite and PostgreSQL) lists each
request a turn waits on when several calls of one model reply asked: one row each."""

from __future__ import annotations

import json

from agent import (
    Agent,
    InboundEvent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    Speaker,
    ToolCall,
    ToolContext,
    TurnStatus,
    tool,
)
from storage import SqlStore
from tests.support import children

S1 = "slack:T1:C1:1700000000.000100"


@tool
async def ship(release: str, ctx: ToolContext) -> str:
    """Asks the release's owner."""
    owner = {"r1": "U1", "r2": "U2"}[release]
    asked = await ctx.request_input(id="go", prompt=f"Ship {release}?", answerers={"user": owner})
    return str(asked)


async def test_approvals_lists_one_row_per_waiting_request(
    sql_store: SqlStore, sql_url: str
) -> None:
    agent = Agent(name="a", instructions="x", tools=[ship])
    calls = [ToolCall(id=f"c-{r}", name="ship", input={"release": r}) for r in ("r1", "r2")]
    model = ScriptedModel([ScriptedReply(tool_calls=calls), ScriptedReply(text="shipped")])
    said = InboundEvent(
        source="slack",
        text="ship both",
        user=Speaker(id="U1", attested=True),
        context={"team": "T1", "channel": "C1"},
    )
    async with Runtime(sql_store, model, agent=agent, poll_interval=0.02, tool_concurrency=4) as rt:
        session = rt.session(agent, S1)
        parked = await session.result(await session.start(said, turn_id="t-ship"))
        assert parked.status == TurnStatus.SUSPENDED

    listed = await children.run("bot.cli.main", "approvals", "--json", "--database-url", sql_url)
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted((r["prompt"], r["answerers"]["user"]) for r in rows) == [
        ("Ship r1?", "U1"),
        ("Ship r2?", "U2"),
    ]
    assert len({r["request_id"] for r in rows}) == 2
    assert {r["turn_id"] for r in rows} == {"t-ship"}
