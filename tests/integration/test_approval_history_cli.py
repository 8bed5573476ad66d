"""`bot approvals --history`, run as an operator runs it (a subprocess of `bot.cli.main`) against
SQLite and PostgreSQL: the audit of proposed writes that were answered or expired, newest first,
with who answered, their reason, the call as proposed and, for an edited approval, as it ran;
`--session`, `--since` and `--limit` narrow it; a pending proposal is not in it."""

from __future__ import annotations

import json
import time
from typing import Any

from agent import (
    Agent,
    InboundEvent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    Speaker,
    ToolCall,
    tool,
)
from storage import SqlStore
from tests.support import children

S1 = "slack:T1:C1:1700000000.000100"
S2 = "slack:T1:C2:1700000001.000200"


@tool(effect="write", confirmation="required", editable=["amount"])
async def refund(order: str, amount: int) -> dict[str, Any]:
    """Refund an order (the approver may change the amount)."""
    return {"refunded": order, "amount": amount}


AGENT = Agent(name="a", instructions="x", tools=[refund])


def _said(text: str) -> InboundEvent:
    return InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id="U1", attested=True),
        context={"team": "T1", "channel": "C1"},
    )


def _model() -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        last = request.messages[-1]
        if last.role == "user" and last.text.startswith("refund "):
            _, order = last.text.split()
            call = ToolCall(id=f"c-{order}", name="refund", input={"order": order, "amount": 400})
            return ScriptedReply(tool_calls=[call])
        return ScriptedReply(text="ok")

    return ScriptedModel(responder=respond)


async def _bot(*args: str) -> children.Ran:
    return await children.run("bot.cli.main", *args)


def _lines(done: children.Ran) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def _propose(rt: Runtime, key: str, order: str) -> Any:
    session = rt.session(AGENT, key)
    await session.result(await session.start(_said(f"refund {order}"), turn_id=f"t-{order}"))
    return next(c for c in await session.confirmations() if c.turn_id == f"t-{order}")


async def test_the_history_lists_answers_newest_first_with_what_ran(
    sql_store: SqlStore, sql_url: str
) -> None:
    now = [time.time() - 3_600]
    rt = Runtime(sql_store, _model(), agent=AGENT, clock=lambda: now[0], poll_interval=0.02)
    async with rt:
        edited = await _propose(rt, S1, "A1")
        denied = await _propose(rt, S2, "B2")
        waiting = await _propose(rt, S1, "C3")
        s1, s2 = rt.session(AGENT, S1), rt.session(AGENT, S2)
        await s2.confirm(denied.confirmation_id, False, by="U1", reason="wrong order")
        now[0] += 1_800  # half an hour later
        done = await s1.confirm(edited.confirmation_id, True, by="U1", edits={"amount": 40})
        await s1.result(done)

    records = _lines(await _bot("approvals", "--history", "--json", "--database-url", sql_url))
    assert [r["request_id"] for r in records] == [edited.confirmation_id, denied.confirmation_id]
    assert waiting.confirmation_id not in [r["request_id"] for r in records]
    first, second = records
    assert (first["outcome"], first["by"], first["tool"]) == ("accepted", "U1", "refund")
    assert first["arguments"] == {"order": "A1", "amount": 400}
    assert first["approved_arguments"] == {"order": "A1", "amount": 40}
    assert first["changes"] == {"amount": {"from": 400, "to": 40}}
    assert (second["outcome"], second["reason"], second["approved_arguments"]) == (
        "denied",
        "wrong order",
        None,
    )

    table = await _bot("approvals", "--history", "--database-url", sql_url)
    assert table.returncode == 0, table.stderr
    edited_row, denied_row = table.stdout.splitlines()[1:3]
    assert "approved (edited)" in edited_row
    assert "amount 400→40" in edited_row
    assert "denied" in denied_row
    assert "wrong order" in denied_row

    only_s2 = await _bot(
        "approvals", "--history", "--session", S2, "--json", "--database-url", sql_url
    )
    assert [r["request_id"] for r in _lines(only_s2)] == [denied.confirmation_id]
    recent = await _bot(
        "approvals", "--history", "--since", "45m", "--json", "--database-url", sql_url
    )
    assert [r["request_id"] for r in _lines(recent)] == [edited.confirmation_id]
    one = await _bot("approvals", "--history", "--limit", "1", "--json", "--database-url", sql_url)
    assert [r["request_id"] for r in _lines(one)] == [edited.confirmation_id]
    bad = await _bot("approvals", "--history", "--limit", "0", "--database-url", sql_url)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
