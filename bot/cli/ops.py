"""Operator commands: effect receipts (`bot receipts ...`), checkpoint compatibility
(`bot check`) and the answers' feedback (`bot feedback`). They read and settle what the engine
and the bot recorded; they never call a provider or Slack. What they take is in
`bot.cli.operator.arguments`, with every operator command's."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from datetime import UTC, datetime
from typing import Any

from agent import Agent, ReceiptRecord, ReceiptStatus, TurnStatus, resolve_receipt
from agent.seams import TurnKind, parked_requests
from storage import SqlStore


async def receipts_command(args: argparse.Namespace, url: str) -> int:
    store = await SqlStore.open(url)
    try:
        if args.receipts_command == "list":
            status = ReceiptStatus(args.status) if args.status else None
            rows = await store.list_receipts(session=args.session, status=status)
            if args.json:
                for r in rows:
                    sys.stdout.write(json.dumps(receipt_json(r), ensure_ascii=False) + "\n")
                sys.stdout.flush()
                return 0
            for r in rows:
                print(
                    f"{r.status.value:<10} {r.session}  {r.key}  receipt={r.receipt_id} "
                    f"attempt={r.attempt} turn={r.turn_id} step={r.step_id}"
                    + (f"  error={r.error}" if r.error else "")
                )
            if not rows:
                print("no receipts")
            return 0
        status = ReceiptStatus.COMPLETED if args.completed else ReceiptStatus.FAILED
        value = args.value  # JSON already read (`arguments.json_value`)
        if args.failed and value is not None:
            print(
                "bot receipts resolve: --failed takes no --value (nothing was applied)",
                file=sys.stderr,
            )
            return 2
        settled = await resolve_receipt(store, args.session, args.key, status=status, value=value)
        print(f"{settled.key}: {settled.status.value}")
        return 0
    finally:
        await store.close()


def receipt_json(receipt: ReceiptRecord) -> dict[str, Any]:
    """A receipt as `bot receipts list --json` prints it (one JSON line each, as every operator
    command's `--json`; times in UTC)."""
    return {
        "session": receipt.session,
        "key": receipt.key,
        "status": receipt.status.value,
        "receipt_id": receipt.receipt_id,
        "attempt": receipt.attempt,
        "turn_id": receipt.turn_id,
        "step_id": receipt.step_id,
        "value": receipt.value,
        "error": receipt.error,
        "created_at": datetime.fromtimestamp(receipt.created_at, UTC).isoformat(),
        "updated_at": datetime.fromtimestamp(receipt.updated_at, UTC).isoformat(),
    }


async def check_command(url: str, agent: Agent) -> int:
    """Exit 1 when some open turn started under another agent fingerprint: after a deploy, a
    parked turn whose tool no longer exists would otherwise fail only when someone answers.
    The agent's MCP servers are listed first (their tools are in the fingerprint, so a server
    whose tools changed under a parked turn shows here); one that cannot be reached is a
    problem too (the bot would start without its tools)."""
    if agent.mcp is None and agent.mcp_servers:
        from agent.mcp import attach_mcp

        agent = await attach_mcp(agent)
    try:
        return await _check(url, agent)
    finally:
        if agent.mcp is not None:
            await agent.mcp.close()


async def _check(url: str, agent: Agent) -> int:
    store = await SqlStore.open(url)
    try:
        problems = 0
        down = sorted(agent.mcp.unavailable.items()) if agent.mcp is not None else []
        for server, why in down:
            print(f"mcp server {server}: unavailable ({why}); its tools are absent")
        for turn in await store.open_turns():
            if turn.kind != TurnKind.TURN or turn.fingerprint in (None, agent.fingerprint):
                continue
            problems += 1
            detail = ""
            if turn.status == TurnStatus.SUSPENDED:
                session = await store.get_session(turn.session)
                waiting = parked_requests(session.pending) if session else []
                gone = sorted({r.tool for r in waiting if agent.tool_named(r.tool) is None})
                if gone:
                    names = ", ".join(repr(tool) for tool in gone)
                    detail = f"; parked in tool {names}, which the agent no longer has"
            print(
                f"{turn.status.value:<9} {turn.session} turn={turn.turn_id} started under "
                f"{turn.fingerprint}, agent is now {agent.fingerprint}{detail}"
            )
        if problems:
            print(f"{problems} turn(s) under a different agent fingerprint")
        if down:
            print(f"{len(down)} MCP server(s) unavailable")
        if not problems and not down:
            print("ok")
        return 1 if problems or down else 0
    finally:
        await store.close()


FEEDBACK_COLUMNS = ("clicked_at", "team", "user", "session", "turn_id", "value")


async def feedback_command(args: argparse.Namespace, url: str) -> int:
    """Every answer's feedback, oldest first, as CSV (with a header) or JSON lines."""
    from storage.delivery.store import DeliveryStore

    store = await SqlStore.open(url)  # says `bot db upgrade` for a database below this code
    try:
        delivery = await DeliveryStore.open(url, store=store)
        try:
            rows = await delivery.feedback(since=args.since)
        finally:
            await delivery.close()
    finally:
        await store.close()
    records = [
        {
            "clicked_at": datetime.fromtimestamp(row.clicked_at, UTC).isoformat(),
            "team": row.team,
            "user": row.user_id,
            "session": row.session_key,
            "turn_id": row.turn_id,
            "value": row.value,
        }
        for row in rows
    ]
    if args.format == "jsonl":
        for record in records:
            sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        writer = csv.DictWriter(sys.stdout, fieldnames=FEEDBACK_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    sys.stdout.flush()
    return 0
