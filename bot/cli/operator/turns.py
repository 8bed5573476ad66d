"""`bot turns`: a session's turns, the open turns of every session, or (`--stuck`) the turns
that need a person, each with the reason it is listed.

A turn is stuck, from what the database records, when:
- `lease_expired`: it is running (or about to start) under a lease whose worker stopped
  renewing it: the process died or hangs, and no worker has taken the session up since (a
  live worker's sweep takes an expired lease within seconds, so this means none is sweeping);
- `no_lease`: it is running and no worker holds its session's lease (a worker gave the session
  up mid-turn, e.g. closing during a database outage, and none has taken it since);
- `queued`: it has waited longer than `--queued-for` (default 5m) without starting: since it was
  queued, or, for the session's next turn, since the session last changed (a park answered or
  stopped queues the parked turn again); behind another turn, it names that turn;
- `failing`: the session's latest turns failed `--failures` times in a row or more (default 2),
  with no turn since that completed, was cancelled or parked: every message of that
  conversation fails, and it needs a person (`bot reset` gives it a fresh start).

The engine keeps no count of how often a worker took a turn up and died with it; a turn that
crashes every worker that runs it shows as `lease_expired` between one worker's death and the
next one's sweep, and as a growing lease epoch (`lease_epoch` in `--json`).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Any

from agent import TurnRecord, TurnStatus
from agent.seams import SessionRecord
from bot.cli.operator.output import duration, iso, json_lines, one_line, table
from bot.cli.operator.stores import Databases


@dataclass(frozen=True, kw_only=True)
class Reason:
    code: str
    detail: str


@dataclass(kw_only=True)
class Listed:
    turn: TurnRecord
    session: SessionRecord | None = None
    reasons: list[Reason] = field(default_factory=list)
    waiting_since: float | None = None
    failures: int | None = None


async def turns_command(args: argparse.Namespace, dbs: Databases) -> int:
    if args.session is not None:
        await dbs.require_session(args.session)
    now = time.time()
    if args.stuck:
        listed = await stuck_turns(dbs, now, args.queued_for, args.failures)
        if args.session is not None:
            listed = [item for item in listed if item.turn.session == args.session]
    elif args.session is not None:
        record = await dbs.store.get_session(args.session)
        turns = await dbs.store.list_turns(args.session)
        listed = [Listed(turn=t, session=record) for t in turns]
    else:
        listed = [
            Listed(turn=t, session=record)
            for record, turns in await dbs.store.open_work()
            for t in turns
        ]
    records = [_record(item, now) for item in listed]
    if args.json:
        json_lines(records)
    elif not records:
        print("nothing stuck" if args.stuck else "no turns")
    else:
        _print_table(records, stuck=args.stuck)
    return 1 if args.stuck and records else 0


async def stuck_turns(dbs: Databases, now: float, queued_for: float, failures: int) -> list[Listed]:
    found: list[Listed] = []
    for record, turns in await dbs.store.open_work():
        found.extend(_judge(record, turns, now, queued_for))
    for streak in await dbs.store.failure_streaks(failures):
        latest = streak[-1]
        error = _error(latest) or "no error recorded"
        found.append(
            Listed(
                turn=latest,
                reasons=[
                    Reason(
                        code="failing",
                        detail=f"{len(streak)} failed turns in a row; the latest: {error}",
                    )
                ],
                failures=len(streak),
            )
        )
    if not found:
        return []
    sessions = {item.turn.session for item in found if item.session is None}
    for key in sessions:
        state = await dbs.store.get_session(key)
        for item in found:
            if item.turn.session == key and item.session is None:
                item.session = state
    found.sort(key=lambda item: (item.turn.session, item.turn.seq))
    return found


def _judge(
    session: SessionRecord, turns: list[TurnRecord], now: float, queued_for: float
) -> list[Listed]:
    """The session's unfinished turns that are stuck, and why (parked ones are `bot
    approvals`' business: they wait for a person by design)."""
    unfinished = [t for t in turns if t.status in (TurnStatus.QUEUED, TurnStatus.RUNNING)]
    if not unfinished:
        return []
    head = unfinished[0]
    owner = session.lease_owner
    live = owner is not None and session.lease_expires_at >= now
    listed: list[Listed] = []
    for turn in unfinished:
        reasons: list[Reason] = []
        if turn is head and owner is not None and not live:
            ago = duration(now - session.lease_expires_at)
            reasons.append(
                Reason(
                    code="lease_expired",
                    detail=f"the lease of {owner} expired {ago} ago and no worker has taken "
                    "the session up since",
                )
            )
        elif turn.status == TurnStatus.RUNNING and owner is None:
            reasons.append(
                Reason(
                    code="no_lease",
                    detail="running, but no worker holds the session's lease (one gave it up "
                    f"mid-turn, {duration(now - session.updated_at)} ago at the latest)",
                )
            )
        since = None
        if turn.status == TurnStatus.QUEUED:
            since = max(turn.created_at, session.updated_at) if turn is head else turn.created_at
            if now - since >= queued_for:
                where = (
                    "not started"
                    if turn is head
                    else f"behind turn {head.turn_id} ({head.status.value})"
                )
                reasons.append(
                    Reason(code="queued", detail=f"queued for {duration(now - since)}, {where}")
                )
        if reasons:
            listed.append(Listed(turn=turn, session=session, reasons=reasons, waiting_since=since))
    return listed


def _error(turn: TurnRecord) -> str | None:
    result = turn.result
    if isinstance(result, dict):
        error = result.get("error")
        return str(error) if error is not None else None
    return None


def _record(item: Listed, now: float) -> dict[str, Any]:
    turn, session = item.turn, item.session
    record: dict[str, Any] = {
        "session": turn.session,
        "turn_id": turn.turn_id,
        "kind": turn.kind.value,
        "status": turn.status.value,
        "queued_at": iso(turn.created_at),
        "age_seconds": now - turn.created_at,
        "text": turn.input.text,
        "cancel_reason": turn.cancel_reason,
        "cancelled_by": turn.cancelled_by,
        "error": _error(turn),
        "fingerprint": turn.fingerprint,
    }
    if session is not None:
        record["lease"] = {
            "owner": session.lease_owner,
            "expires_at": iso(session.lease_expires_at) if session.lease_owner else None,
            "epoch": session.lease_epoch,
        }
    if item.reasons:
        record["reasons"] = [{"code": r.code, "detail": r.detail} for r in item.reasons]
    if item.waiting_since is not None:
        record["waiting_seconds"] = now - item.waiting_since
    if item.failures is not None:
        record["failures"] = item.failures
    return record


def _print_table(records: list[dict[str, Any]], *, stuck: bool) -> None:
    if stuck:
        table(
            ["session", "turn", "status", "reason", "detail"],
            [
                [
                    r["session"],
                    r["turn_id"],
                    r["status"],
                    ",".join(reason["code"] for reason in r["reasons"]),
                    "; ".join(one_line(reason["detail"], 160) for reason in r["reasons"]),
                ]
                for r in records
            ],
        )
        return
    table(
        ["session", "turn", "kind", "status", "age", "detail", "text"],
        [
            [
                r["session"],
                r["turn_id"],
                r["kind"],
                r["status"],
                duration(r["age_seconds"]),
                _detail(r),
                one_line(r["text"], 60),
            ]
            for r in records
        ],
    )


def _detail(record: dict[str, Any]) -> str:
    if record["error"]:
        return one_line(str(record["error"]), 60)
    if record["cancel_reason"]:
        by = f" by {record['cancelled_by']}" if record["cancelled_by"] else ""
        return f"cancel: {record['cancel_reason']}{by}"
    return "-"
