"""`bot approvals --history`: the audit of proposed writes that were answered or expired.

Newest first, each with who answered and when, what they said, the quorum's approvers, and the
call twice: as the model proposed it (`arguments`) and as it ran (`approved_arguments`, which
differ only where the approver edited it first; `changes` says how). What is listed is the
store's own record of each answer (`Approvals.answered_confirmations`), written in the same
transaction that queued the turn acting on it, so the audit cannot list an answer that did not
happen nor miss one that did. A reset keeps these rows; a prune of history removes them with
their session (`bot prune`).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from agent import ConfirmationRecord, request_tally
from bot.cli.operator.approvals import answerers_json
from bot.cli.operator.links import approval_message_ts, thread_place
from bot.cli.operator.output import iso, json_lines, one_line, table
from bot.cli.operator.stores import Databases

OUTCOMES = {"accepted": "approved", "denied": "denied", "expired": "expired"}


async def history_command(args: argparse.Namespace, dbs: Databases) -> int:
    since = None if args.since is None else time.time() - args.since
    if args.session is not None:
        await dbs.require_session(args.session)
        answered = [
            c
            for c in reversed(await dbs.store.list_confirmations(args.session))
            if c.resolved_at is not None and (since is None or c.resolved_at >= since)
        ]
        answered.sort(key=lambda c: c.resolved_at or 0.0, reverse=True)
        answered = answered[: args.limit]
    else:
        answered = await dbs.store.answered_confirmations(since=since, limit=args.limit)
    records = [await _record(dbs, c, args.slack_domain) for c in answered]
    if args.json:
        json_lines(records)
        return 0
    if not records:
        print("no answered approvals")
        return 0
    table(
        ["answered", "outcome", "by", "session", "tool", "call", "reason", "link"],
        [
            [
                r["resolved_at"] or "-",
                OUTCOMES.get(r["outcome"], r["outcome"]) + (" (edited)" if r["changes"] else ""),
                _who(r),
                r["session"],
                r["tool"],
                one_line(_call_text(r), 56),
                one_line(r["reason"] or "-", 32),
                r["link"] or "-",
            ]
            for r in records
        ],
    )
    return 0


async def _record(
    dbs: Databases, proposal: ConfirmationRecord, domain: str | None
) -> dict[str, Any]:
    tally = await request_tally(
        dbs.store, proposal.session, "confirm", proposal.turn_id, proposal.confirmation_id
    )
    place = await thread_place(dbs.delivery, proposal.session)
    message_ts = None
    if place is not None:
        message_ts = await approval_message_ts(
            dbs.delivery, proposal.session, "confirm", proposal.confirmation_id
        )
    approved = proposal.approved_arguments
    return {
        "kind": "confirmation",
        "session": proposal.session,
        "turn_id": proposal.turn_id,
        "request_id": proposal.confirmation_id,
        "tool": proposal.tool,
        "prompt": proposal.prompt,
        "outcome": proposal.status.value,
        "by": proposal.by,
        "approved_by": list(tally.approved_by) if tally is not None else None,
        "denied_by": list(tally.denied_by) if tally is not None else None,
        "reason": proposal.reason,
        "asked_at": iso(proposal.created_at),
        "resolved_at": iso(proposal.resolved_at),
        "answerers": answerers_json(proposal.answerers),
        "arguments": proposal.arguments,
        "approved_arguments": approved,
        "changes": None if approved is None else _changes(proposal.arguments, approved),
        "follow_up_turn": proposal.follow_up_turn,
        "link": None if place is None else place.link(domain, message_ts),
    }


def _changes(proposed: dict[str, Any], approved: dict[str, Any]) -> dict[str, Any]:
    return {
        name: {"from": proposed.get(name), "to": value}
        for name, value in approved.items()
        if proposed.get(name) != value
    }


def _who(record: dict[str, Any]) -> str:
    if record["outcome"] == "expired":
        return "nobody"
    approvers = record["approved_by"]
    if record["outcome"] == "accepted" and approvers:
        return ",".join(approvers)
    return str(record["by"] or "host code")


def _call_text(record: dict[str, Any]) -> str:
    """The call as it ran where it was edited ("amount 400→40"), else as proposed."""
    changes = record["changes"]
    if changes:
        return "; ".join(
            f"{name} {json.dumps(c['from'])}→{json.dumps(c['to'])}" for name, c in changes.items()
        )
    return json.dumps(record["arguments"], sort_keys=True)
