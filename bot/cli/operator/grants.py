"""`bot grants`: the standing grants ("Approve, and allow this again") of every workspace, and
revoking one.

Listed as the engine lists them for an operator (`standing_grants` with no principal: every
workspace's), each with the tool, whose calls it covers, where (a thread's session, or a
channel), who granted it and when it lapses; `--all` adds revoked and expired ones, each with
its state. `--revoke ID` revokes one at once, as an operator: the engine's rights check (the
granter, the person covered, or whom the agent's `authorize_answer` admits) is for people
reaching the bot; whoever runs this holds the database, so the grant's store call is made
directly, recording who as `--by` says or `operator`. The next call the grant covered is asked
again, in whichever process runs it (grants are read from the database at each call).
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Literal

from agent import GrantRecord, GrantScope, standing_grants
from bot.cli.operator.output import OperatorError, duration, iso, json_lines, table
from bot.cli.operator.stores import Databases

OPERATOR = "operator"
"""Who a revocation records when `--by` names nobody."""
State = Literal["live", "revoked", "expired"]


async def grants_command(args: argparse.Namespace, dbs: Databases) -> int:
    if args.revoke is None:
        if args.by is not None:
            raise OperatorError("--by goes with --revoke ID")
        return await _list(args, dbs)
    if args.all:
        raise OperatorError("--all lists grants; it does not go with --revoke")
    return await _revoke(args, dbs)


async def _list(args: argparse.Namespace, dbs: Databases) -> int:
    now = time.time()
    if args.all:
        found = await dbs.store.list_grants()
    else:
        found = await standing_grants(dbs.store, None, now=now)
    records = [grant_json(grant, now) for grant in found]
    if args.json:
        json_lines(records)
        return 0
    if not records:
        print("no standing grants" if args.all else "no live standing grants")
        return 0
    table(
        ["grant", "state", "tool", "team", "speaker", "granted by", "expires", "where"],
        [
            [
                r["grant_id"],
                r["state"],
                r["tool"],
                r["team"],
                r["speaker"],
                r["granted_by"],
                _expiry_text(r["expires_in_seconds"]),
                _where(r),
            ]
            for r in records
        ],
    )
    return 0


async def _revoke(args: argparse.Namespace, dbs: Databases) -> int:
    """Exit 0 once revoked; 1 when it was no longer live (revoked before, or expired), which
    changes nothing; an unknown id is the usage error (exit 2)."""
    grant_id: str = args.revoke
    by: str = args.by or OPERATOR
    now = time.time()
    grant = await dbs.store.get_grant(grant_id)
    if grant is None:
        raise OperatorError(f"no standing grant {grant_id!r} in the database")
    revoked = None
    if _state(grant, now) == "live":
        revoked = await dbs.store.revoke_grant(grant_id, by=by, now=now)
    # Another revocation between the read and this one stands, and is reported as it is.
    done = revoked is not None and revoked.revoked_at == now and revoked.revoked_by == by
    stored = revoked or grant
    record = grant_json(stored, now)
    if args.json:
        json_lines([{"action": "revoke", "revoked": done, **record}])
    elif done:
        print(f"revoked {grant_id} by {by}: {stored.tool} for {stored.speaker} in {_where(record)}")
    elif stored.revoked_at is not None:
        print(
            f"nothing to revoke: {grant_id} was revoked by {stored.revoked_by} at "
            f"{iso(stored.revoked_at)}"
        )
    else:
        print(f"nothing to revoke: {grant_id} expired at {iso(stored.expires_at)}")
    return 0 if done else 1


def grant_json(grant: GrantRecord, now: float) -> dict[str, Any]:
    return {
        "grant_id": grant.grant_id,
        "state": _state(grant, now),
        "tool": grant.tool,
        "team": grant.team,
        "enterprise": grant.enterprise,
        "scope": grant.scope.value,
        "session": grant.session,
        "channel": grant.channel,
        "speaker": grant.speaker,
        "granted_by": grant.granted_by,
        "confirmation_id": grant.confirmation_id,
        "created_at": iso(grant.created_at),
        "expires_at": iso(grant.expires_at),
        "expires_in_seconds": grant.expires_at - now,
        "revoked_at": iso(grant.revoked_at),
        "revoked_by": grant.revoked_by,
    }


def _state(grant: GrantRecord, now: float) -> State:
    if grant.revoked_at is not None:
        return "revoked"
    return "live" if grant.live(now) else "expired"


def _where(record: dict[str, Any]) -> str:
    if record["scope"] == GrantScope.CHANNEL.value:
        return f"channel {record['channel']}"
    return f"thread {record['session']}"


def _expiry_text(left: float) -> str:
    return f"in {duration(left)}" if left > 0 else f"{duration(-left)} ago"
