"""SIGKILL of the bot between the MCP server's answer and the receipt's commit: the write
happened at the server, the engine's receipt says only `prepared`. The next worker must not send
it again: the receipt becomes uncertain, the model reads that, and the server counted one run.
On SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent import ReceiptStatus
from tests.support import children
from tests.support.mcp_servers.fixtures import read_runs

CHILD = "tests.support.mcp_servers.mcp_child"


async def test_sigkill_after_the_server_answered_leaves_the_write_uncertain(
    sql_store: Any, sql_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs.jsonl"
    proc = await children.start(CHILD, sql_url, str(runs), "m1", "T1", "--crash-before-settle")
    try:
        assert (await children.wait_line(proc, "AT ", within=60)).strip() == "AT settle"
    finally:
        await children.kill(proc)
    assert len(read_runs(runs)) == 1, "the server ran the write"
    [pending] = await sql_store.list_receipts(session="m1")
    assert pending.status == ReceiptStatus.PREPARED
    assert read_runs(runs)[0]["key"] == f"m1/{pending.key}"

    lines = await children.finish(
        await children.start(CHILD, sql_url, str(runs), "m1", "T1", "--recover-only")
    )
    assert lines[-1].startswith("RESULT completed failed: EffectUncertainError")
    [settled] = await sql_store.list_receipts(session="m1")
    assert settled.status == ReceiptStatus.UNCERTAIN
    assert settled.receipt_id == pending.receipt_id
    assert len(read_runs(runs)) == 1, "no blind retry after the crash"
