"""Operator commands: effect receipts (`bot receipts ...`), checkpoint compatibility
(`bot check`) and the answers' feedback (`bot feedback`). They read and settle what the engine
and the bot recorded; they never call a provider or Slack."""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from agent import Agent, ReceiptRecord, ReceiptStatus, TurnStatus, resolve_receipt
from agent.seams import TurnKind, parked_request
from bot.ages import age_seconds_of
from storage import SqlStore


def register(sub: Any) -> None:
    receipts = sub.add_parser("receipts", help="durable effect receipts")
    receipts_sub = receipts.add_subparsers(dest="receipts_command", required=True)
    listing = receipts_sub.add_parser("list", help="list receipts")
    listing.add_argument("--status", choices=[s.value for s in ReceiptStatus])
    listing.add_argument("--session")
    listing.add_argument("--json", action="store_true", help="JSON lines, one per receipt")
    listing.add_argument("--database-url", default=None)
    resolve = receipts_sub.add_parser(
        "resolve", help="settle an uncertain receipt with what the provider shows"
    )
    resolve.add_argument("session")
    resolve.add_argument("key", help="the stored key, `<tool>:<key>`")
    outcome = resolve.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--completed", action="store_true", help="the write happened")
    outcome.add_argument("--failed", action="store_true", help="the write did not happen")
    resolve.add_argument("--value", default="null", help="JSON observed at the provider")
    resolve.add_argument("--database-url", default=None)
    check = sub.add_parser(
        "check", help="report parked or running turns whose agent changed since they started"
    )
    check.add_argument("--database-url", default=None)
    check.add_argument("--agent-dir", default=None)
    feedback = sub.add_parser(
        "feedback", help="export what people said of the answers (the 👍 / 👎 buttons)"
    )
    feedback.add_argument("--format", choices=["csv", "jsonl"], default="csv")
    feedback.add_argument(
        "--since",
        type=since_timestamp,
        default=None,
        help="only clicks at or after this: an ISO date or time (UTC unless it says), or an "
        "age such as 90m, 24h, 7d",
    )
    feedback.add_argument("--database-url", default=None)


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
        value = json.loads(args.value)
        if args.failed and value is not None:
            print("bot receipts resolve: --failed takes no --value (nothing was applied)")
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
    parked turn whose tool no longer exists would otherwise fail only when someone answers."""
    store = await SqlStore.open(url)
    try:
        problems = 0
        for turn in await store.open_turns():
            if turn.kind != TurnKind.TURN or turn.fingerprint in (None, agent.fingerprint):
                continue
            problems += 1
            detail = ""
            if turn.status == TurnStatus.SUSPENDED:
                session = await store.get_session(turn.session)
                request = parked_request(session.pending) if session else None
                tool = request.tool if request is not None else None
                if tool and agent.tool_named(tool) is None:
                    detail = f"; parked in tool {tool!r}, which the agent no longer has"
            print(
                f"{turn.status.value:<9} {turn.session} turn={turn.turn_id} started under "
                f"{turn.fingerprint}, agent is now {agent.fingerprint}{detail}"
            )
        print(f"{problems} turn(s) under a different agent fingerprint" if problems else "ok")
        return 1 if problems else 0
    finally:
        await store.close()


FEEDBACK_COLUMNS = ("clicked_at", "team", "user", "session", "turn_id", "value")


def _age(value: str) -> float | None:
    return age_seconds_of(value, units="smhd")


def age_seconds(value: str) -> float:
    """An age or a duration, as `--since` takes one (`90m`, `24h`, `7d`; also `30s`)."""
    seconds = _age(value)
    if seconds is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an age like 30s, 90m, 24h or 7d (a number and s, m, h or d)"
        )
    return seconds


def since_timestamp(value: str) -> float:
    """`--since`: an ISO 8601 date or time (naive means UTC), or an age (`90m`, `24h`, `7d`)."""
    seconds = _age(value)
    if seconds is not None:
        return time.time() - seconds
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r} is neither an ISO date or time nor an age like 24h or 7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


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
