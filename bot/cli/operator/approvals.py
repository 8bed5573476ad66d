"""`bot approvals`: every request waiting for a person, across sessions.

Parked `ctx.request_input` calls and proposed writes awaiting confirmation, each with its
session, turn, request id, prompt, how long ago it was asked, when it expires, who may answer
it, and a link to its Slack thread. What is listed is the engine's own query
(`Runtime.pending_approvals`, the one the Home inbox's `answerable` narrows to one person), so
this command and the inbox cannot disagree about what is pending.

With `--json` each request carries its `digest`, what an answer is bound to (the HTTP API's
`resume` and `confirmations/{id}` take it), as the Slack buttons carry it.

Who may answer is printed as the request stores it: a user, a quorum (with who approved so
far, and `votes` in the JSON), or a policy (which people it
admits is the agent's `authorize_answer` to decide when one of them clicks; the command runs no
agent code), or nobody named (host code answers).
"""

from __future__ import annotations

import argparse
import time
from typing import Any, assert_never

from agent import Answerer, PendingApproval, PolicyAnswerer, QuorumAnswerer, UserAnswerer
from bot.cli.operator.links import approval_message_ts, thread_place
from bot.cli.operator.output import duration, iso, json_lines, one_line, table
from bot.cli.operator.stores import Databases, acting_runtime


async def approvals_command(args: argparse.Namespace, dbs: Databases) -> int:
    if args.session is not None:
        await dbs.require_session(args.session)
    async with acting_runtime(dbs.store, None, "") as runtime:
        pending = await runtime.pending_approvals()
    now = time.time()
    chosen = [
        p
        for p in pending
        if (args.session is None or p.session == args.session)
        and (args.older_than is None or _age(p, now) is None or _age(p, now) >= args.older_than)
    ]
    records = [await _record(dbs, p, now, args.slack_domain) for p in chosen]
    if args.json:
        json_lines(records)
        return 0
    if not records:
        print("no pending approvals")
        return 0
    table(
        ["age", "kind", "session", "turn", "request", "answerers", "expires", "prompt", "link"],
        [
            [
                duration(r["age_seconds"]),
                r["kind"],
                r["session"],
                r["turn_id"],
                r["request_id"],
                _answerers_text(r["answerers"], r["votes"], r["escalated_to"]),
                _expiry_text(r["expires_in_seconds"]),
                one_line(r["prompt"], 48),
                r["link"] or "-",
            ]
            for r in records
        ],
    )
    return 0


def _age(pending: PendingApproval, now: float) -> float | None:
    return None if pending.created_at is None else now - pending.created_at


async def _record(
    dbs: Databases, pending: PendingApproval, now: float, domain: str | None
) -> dict[str, Any]:
    place = await thread_place(dbs.delivery, pending.session)
    message_ts = None
    if place is not None:
        message_ts = await approval_message_ts(
            dbs.delivery, pending.session, pending.kind, pending.request_id
        )
    return {
        "kind": pending.kind,
        "session": pending.session,
        "turn_id": pending.turn_id,
        "request_id": pending.request_id,
        "digest": pending.digest,
        "tool": pending.tool,
        "prompt": pending.prompt,
        "asked_by": pending.asked_by,
        "asked_at": iso(pending.created_at),
        "age_seconds": _age(pending, now),
        "expires_at": iso(pending.expires_at),
        "expires_in_seconds": None if pending.expires_at is None else pending.expires_at - now,
        "answerers": answerers_json(pending.answerers),
        "escalated_to": [answerers_json(extra) for extra in pending.escalated_to],
        "votes": None
        if pending.tally is None
        else {
            "need": pending.tally.need,
            "approved_by": list(pending.tally.approved_by),
            "denied_by": list(pending.tally.denied_by),
        },
        "workspace": pending.workspace or None,
        "slack": None if place is None else {**place.to_json(), "message_ts": message_ts},
        "link": None if place is None else place.link(domain, message_ts),
    }


def answerers_json(answerers: Answerer | None) -> dict[str, Any] | None:
    """As the request stores them: `{"user": id}`, `{"policy": p, "scope": s}` or a quorum's
    `{"quorum": n, "users": [...]}` / `{"quorum": n, "policy": p}`; None: no person is named
    (host code answers)."""
    match answerers:
        case None:
            return None
        case UserAnswerer(user=user):
            return {"user": user}
        case PolicyAnswerer(policy=policy, scope=scope):
            return {"policy": policy} if scope is None else {"policy": policy, "scope": scope}
        case QuorumAnswerer():
            stored: dict[str, Any] = answerers.model_dump(mode="json")
            return stored
        case _:
            assert_never(answerers)


def answerers_text(pending: PendingApproval) -> str:
    """Who may answer, in the words `bot approvals` prints (the operator console shows them)."""
    votes = None if pending.tally is None else {"approved_by": list(pending.tally.approved_by)}
    escalated = [answerers_json(extra) for extra in pending.escalated_to]
    return _answerers_text(answerers_json(pending.answerers), votes, escalated)


def _answerers_text(
    answerers: dict[str, Any] | None,
    votes: dict[str, Any] | None,
    escalated_to: list[dict[str, Any] | None],
) -> str:
    """Who may answer, then whom it was escalated to ("user U1; escalated to user UBOSS")."""
    said = _one_answerer_text(answerers, votes)
    extra = [_one_answerer_text(other, None) for other in escalated_to]
    return said + (f"; escalated to {', '.join(extra)}" if extra else "")


def _one_answerer_text(answerers: dict[str, Any] | None, votes: dict[str, Any] | None) -> str:
    if answerers is None:
        return "host code"
    scope = f" ({answerers['scope']})" if answerers.get("scope") else ""
    if "quorum" in answerers:
        among = ",".join(answerers["users"]) if "users" in answerers else answerers["policy"]
        approved = votes["approved_by"] if votes else []
        so_far = f"; approved by {','.join(approved)}" if approved else ""
        need = "any" if answerers["quorum"] == 1 else answerers["quorum"]
        return f"{need} of {among}{scope}{so_far}"
    if "user" in answerers:
        return f"user {answerers['user']}"
    return f"policy {answerers['policy']}{scope}"


def _expiry_text(left: float | None) -> str:
    if left is None:
        return "never"
    return f"in {duration(left)}" if left > 0 else f"due {duration(-left)} ago"
