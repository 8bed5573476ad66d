"""The read that finds a compacting session's newest compaction is an index read on both
databases: the partial index of the marked messages, never a walk over the transcript (sessions
reach tens of thousands of messages, and a resumed turn waits on this read)."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, insert, text

from agent import AssistantMessage, TextBlock, UserMessage
from agent._messages import CompactionBlock
from agent.seams import message_to_json
from storage import SqlStore
from storage.sql.schema import messages
from storage.sql.transcript import _NEWEST_COMPACTION

pytestmark = pytest.mark.timeout(60)

SESSIONS = 4
PER_SESSION = 1_500


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


def _fill(conn: Connection) -> None:
    """Long sessions with a compaction every 500 messages, and the planner's statistics."""
    asked = message_to_json(UserMessage(turn_id="t", text="ok?"))
    said = message_to_json(
        AssistantMessage(turn_id="t", content=(TextBlock(text="ok"),), stop_reason="end_turn")
    )
    summary = message_to_json(
        AssistantMessage(
            turn_id="t",
            content=(CompactionBlock(content="summary"), TextBlock(text="ok")),
            stop_reason="end_turn",
        )
    )
    rows = [
        {
            "session_key": f"s{s}",
            "idx": i,
            "turn_id": "t",
            "role": "user" if i % 2 == 0 else "assistant",
            "body": asked if i % 2 == 0 else summary if i % 500 == 499 else said,
            "compaction": True if i % 500 == 499 else None,
        }
        for s in range(SESSIONS)
        for i in range(PER_SESSION)
    ]
    conn.execute(insert(messages), rows)
    conn.execute(text("ANALYZE"))


def _plan(conn: Connection) -> str:
    query = _NEWEST_COMPACTION.params(b_session="s1").compile(
        conn, compile_kwargs={"literal_binds": True}
    )
    explain = "EXPLAIN QUERY PLAN " if conn.dialect.name == "sqlite" else "EXPLAIN "
    found = conn.exec_driver_sql(explain + str(query)).all()
    return "\n".join(str(row[-1]) for row in found)


async def test_the_newest_compaction_is_read_through_its_partial_index(sql_url: str) -> None:
    store = await SqlStore.open(sql_url)
    try:
        await store.run_sync(_fill, write=True)
        plan = await store.run_sync(_plan)
        tail = await store.load_transcript_tail("s1", 1, since_compaction=True)
    finally:
        await store.close()
    assert "ix_messages_compaction" in plan, plan
    assert "SCAN messages" not in plan, plan
    assert "Seq Scan" not in plan, plan
    assert tail.base == 1_498  # the opening of the turn holding message 1,499
