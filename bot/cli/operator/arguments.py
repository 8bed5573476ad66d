"""What each operator command takes: `bot approvals`, `grants`, `turns`, `cancel`, `reset`,
`receipts`, `check`, `feedback` and `prune`, as argparse reads them, with the types of their
arguments.

Kept apart from the commands, and importing neither the engine nor the database layer, so that
`bot --help`, `bot <command> --help` and a mistyped argument answer at once: the commands'
modules import the engine, SQLAlchemy and the drivers, which takes longer than the answer.
Defaults that a command's module also holds (the stop reason, the receipt statuses) are
checked equal to theirs by a unit test.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from datetime import UTC, datetime
from typing import Any

from bot.cli.operator.output import exit_codes
from bot.core.durations import age_seconds_of

QUEUED_FOR = 300.0
HISTORY_LIMIT = 50
FAILURES = 2
RESET_WAIT = 60.0
RECEIPT_STATUSES = ("prepared", "completed", "failed", "uncertain")
"""`agent.ReceiptStatus`'s values."""
STOPPED = "stopped"
"""`agent.CancelReason.STOPPED`'s value: `bot cancel`'s default reason, which the thread shows
as a Stop."""
PRUNE_BATCH = 500
"""`PRUNE_BATCH`'s default (`bot.core.settings`)."""

DATABASE_URL_HELP = "the database (default: DATABASE_URL, or sqlite+aiosqlite:///./data/bot.db)"


def add_parsers(sub: Any) -> None:
    """Every operator command, on the `bot` parser's subcommands."""
    _approvals(sub)
    _grants(sub)
    _turns(sub)
    _cancel(sub)
    _reset(sub)
    _receipts(sub)
    _check(sub)
    _feedback(sub)
    _prune(sub)


def _database(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--database-url", default=None, metavar="URL", help=DATABASE_URL_HELP)


def _approvals(sub: Any) -> None:
    approvals = sub.add_parser(
        "approvals",
        help="requests waiting for a person (parked turns, pending confirmations)",
        description="Every parked request and pending confirmation, newest first, with its "
        "age, expiry, answerers and a link to its Slack thread.",
        epilog=exit_codes(usage="an unknown session"),
    )
    approvals.add_argument("--session", help="only this session's requests")
    approvals.add_argument(
        "--older-than",
        type=age_seconds,
        default=None,
        metavar="AGE",
        help="only requests asked at least this long ago (30s, 90m, 2h, 7d); a request from "
        "before ages were recorded counts as old",
    )
    approvals.add_argument(
        "--slack-domain",
        type=slack_domain,
        default=None,
        metavar="DOMAIN",
        help="the workspace's domain (acme for acme.slack.com): links become permalinks to "
        "the approval message; without it, a link that opens the channel",
    )
    approvals.add_argument(
        "--history",
        action="store_true",
        help="the audit instead: proposed writes answered or expired, newest first, with who "
        "answered, the call as proposed and as it ran (an edited approval's changes)",
    )
    approvals.add_argument(
        "--since",
        type=age_seconds,
        default=None,
        metavar="AGE",
        help="with --history: only answers given within this long (30m, 2h, 7d)",
    )
    approvals.add_argument(
        "--limit",
        type=history_limit,
        default=HISTORY_LIMIT,
        metavar="N",
        help=f"with --history: at most N answers (default {HISTORY_LIMIT})",
    )
    approvals.add_argument("--json", action="store_true", help="JSON lines, one per request")
    _database(approvals)


def _grants(sub: Any) -> None:
    grants = sub.add_parser(
        "grants",
        help="standing grants (Approve & allow again): list them, or revoke one",
        description="Every live standing grant of every workspace, newest first: the tool, "
        "whose calls it covers, the thread or channel, who granted it and when it lapses. "
        "--revoke ID revokes one at once, as an operator (no rights check: you hold the "
        "database); the next call it covered is asked again.",
        epilog=exit_codes(
            one="with --revoke, when the grant was no longer live (revoked before, or "
            "expired): nothing changed",
            usage="an unknown grant id, --all or --by with the other mode",
        ),
    )
    grants.add_argument(
        "--all", action="store_true", help="also revoked and expired grants, each with its state"
    )
    grants.add_argument(
        "--revoke", type=grant_id, default=None, metavar="ID", help="revoke this grant"
    )
    grants.add_argument(
        "--by",
        type=operator_name,
        default=None,
        metavar="NAME",
        help="with --revoke: who revoked it, as the grant records it (default: operator)",
    )
    grants.add_argument(
        "--json", action="store_true", help="JSON lines, one per grant (or what --revoke did)"
    )
    _database(grants)


def _turns(sub: Any) -> None:
    turns = sub.add_parser(
        "turns",
        help="a session's turns, every open turn, or the stuck ones (--stuck)",
        description="Without options: every queued, running or parked turn of every session. "
        "--session: that session's turns (its live generation). --stuck: the turns that need "
        "a person (expired lease, no lease, queued too long, repeated failures), each with "
        "its reason.",
        epilog=exit_codes(
            one="with --stuck, when a stuck turn is listed", usage="an unknown session"
        ),
    )
    turns.add_argument("--session", help="only this session")
    turns.add_argument("--stuck", action="store_true", help="only turns that need a person")
    turns.add_argument(
        "--queued-for",
        type=age_seconds,
        default=QUEUED_FOR,
        metavar="AGE",
        help="with --stuck: a turn waiting this long without starting is stuck (default 5m)",
    )
    turns.add_argument(
        "--failures",
        type=at_least_one,
        default=FAILURES,
        metavar="N",
        help="with --stuck: this many failed turns in a row make a session stuck (default 2)",
    )
    turns.add_argument("--json", action="store_true", help="JSON lines, one per turn")
    _database(turns)


def _cancel(sub: Any) -> None:
    cancel = sub.add_parser(
        "cancel",
        help="end a session's unfinished turns (as Slack's Stop button), or one of them",
        description="End every unfinished turn of the session, a parked one included, as "
        "Slack's Stop button does; with --turn, only that turn. Durable before it returns; "
        "the worker running the turn stops it at its next checkpoint.",
        epilog=exit_codes(
            one="when nothing was left to cancel, or --wait ran out first",
            usage="an unknown session or turn",
        ),
    )
    cancel.add_argument("session", help="the session key, e.g. slack:T…:C…:1700000000.000100")
    cancel.add_argument("--turn", default=None, help="only this turn")
    cancel.add_argument(
        "--reason",
        default=STOPPED,
        help="why, as the turn records it (default: stopped, which the thread shows as a Stop)",
    )
    cancel.add_argument(
        "--by",
        type=slack_user,
        default=None,
        metavar="USER_ID",
        help="the Slack user id of who asked (the thread then says 'stopped by @them'; "
        "without it, 'stopped by an operator')",
    )
    cancel.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to this long for the turns to end (default: return once asked)",
    )
    cancel.add_argument("--json", action="store_true", help="one JSON line: what was done")
    _database(cancel)


def _reset(sub: Any) -> None:
    reset = sub.add_parser(
        "reset",
        help="archive a session's history so its next message starts fresh (/agent-reset)",
        description="Cancel the session's unfinished turns and archive its history under its "
        "generation, as /agent-reset does. The reset is queued durably and applied by the "
        "worker that takes the session up; this waits for it.",
        epilog=exit_codes(
            one="when the reset was queued but not applied within --wait",
            usage="an unknown session",
        ),
    )
    reset.add_argument("session", help="the session key")
    reset.add_argument(
        "--wait",
        type=float,
        default=RESET_WAIT,
        metavar="SECONDS",
        help=f"how long to wait for a worker to apply it (default {RESET_WAIT:.0f})",
    )
    reset.add_argument("--json", action="store_true", help="one JSON line: what was done")
    _database(reset)


def _receipts(sub: Any) -> None:
    receipts = sub.add_parser(
        "receipts",
        help="durable effect receipts",
        description="The receipts of the tools' durable effects: list them, or settle an "
        "uncertain one with what the provider shows.",
        epilog=exit_codes(usage="for resolve: no such receipt, or one not uncertain"),
    )
    receipts_sub = receipts.add_subparsers(dest="receipts_command", required=True)
    listing = receipts_sub.add_parser(
        "list",
        help="list receipts",
        description="Every receipt, with the error that made one uncertain.",
        epilog=exit_codes(),
    )
    listing.add_argument("--status", choices=RECEIPT_STATUSES)
    listing.add_argument("--session")
    listing.add_argument("--json", action="store_true", help="JSON lines, one per receipt")
    _database(listing)
    resolve = receipts_sub.add_parser(
        "resolve",
        help="settle an uncertain receipt with what the provider shows",
        description="Settle an uncertain receipt: --completed with the value the provider "
        "shows (the write happened), or --failed (it did not; no value). No later turn "
        "retries an uncertain effect until it is settled.",
        epilog=exit_codes(
            usage="no such receipt, one that is not uncertain, --failed with a --value"
        ),
    )
    resolve.add_argument("session")
    resolve.add_argument("key", help="the stored key, `<tool>:<key>`")
    outcome = resolve.add_mutually_exclusive_group(required=True)
    outcome.add_argument("--completed", action="store_true", help="the write happened")
    outcome.add_argument("--failed", action="store_true", help="the write did not happen")
    resolve.add_argument(
        "--value", type=json_value, default=None, help="JSON observed at the provider"
    )
    _database(resolve)


def _check(sub: Any) -> None:
    check = sub.add_parser(
        "check",
        help="report parked or running turns whose agent changed since they started",
        description="After a deploy: list every parked or running turn that started under "
        "another agent fingerprint (naming a parked tool the agent no longer has), which "
        "would otherwise fail only when someone answers or the turn resumes.",
        epilog=exit_codes(
            one="when a turn started under another agent fingerprint is listed",
            usage="an agent that does not load",
        ),
    )
    _database(check)
    check.add_argument(
        "--agent-dir", default=None, help="the agent to compare with (default: AGENT_DIR)"
    )


def _feedback(sub: Any) -> None:
    feedback = sub.add_parser(
        "feedback",
        help="export what people said of the answers (the 👍 / 👎 buttons)",
        description="Every click of the 👍 / 👎 buttons under a final reply, oldest first: "
        "click time (UTC), team, user, session, turn, positive or negative.",
        epilog=exit_codes(),
    )
    feedback.add_argument("--format", choices=["csv", "jsonl"], default="csv")
    feedback.add_argument(
        "--since",
        type=since_timestamp,
        default=None,
        help="only clicks at or after this: an ISO date or time (UTC unless it says), or an "
        "age such as 90m, 24h, 7d",
    )
    _database(feedback)


def _prune(sub: Any) -> None:
    prune = sub.add_parser(
        "prune",
        help="remove old history: finished turns' steps and events, archived generations",
        description="Remove the history that ended longer ago than the age, in batches of "
        "turns, one short transaction each (live turns go on meanwhile); prints what went, "
        "by kind, or with --dry-run what would go.",
        epilog=exit_codes(usage="an age or a batch size it cannot read"),
    )
    prune.add_argument(
        "--older-than",
        default=None,
        help="an age such as 30d, 12h, 90m or 2w: history that ended longer ago goes "
        "(default: PRUNE_OLDER_THAN)",
    )
    prune.add_argument(
        "--receipts-older-than",
        default=None,
        help="also remove settled effect receipts older than this (default: "
        "PRUNE_RECEIPTS_OLDER_THAN; unset: receipts are kept)",
    )
    prune.add_argument(
        "--batch",
        default=None,
        help=f"turns per transaction (default: PRUNE_BATCH, {PRUNE_BATCH} unless set)",
    )
    prune.add_argument("--dry-run", action="store_true", help="count what would go, change nothing")
    prune.add_argument("--json", action="store_true", help="print the counts as one JSON object")
    _database(prune)


# -- argument types ---------------------------------------------------------------------------


def history_limit(value: str) -> int:
    """`--limit`: a whole number from 1 to 10,000."""
    try:
        limit = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {value!r}") from None
    if not 1 <= limit <= 10_000:
        raise argparse.ArgumentTypeError(f"between 1 and 10000, not {limit}")
    return limit


def age_seconds(value: str) -> float:
    """An age or a duration, as `--older-than` and `--queued-for` take one (`90m`, `24h`,
    `7d`; also `30s`)."""
    seconds = age_seconds_of(value, units="smhd")
    if seconds is None:
        raise argparse.ArgumentTypeError(
            f"{value!r} is not an age like 30s, 90m, 24h or 7d (a number and s, m, h or d)"
        )
    return seconds


def since_timestamp(value: str) -> float:
    """`--since`: an ISO 8601 date or time (naive means UTC), or an age (`90m`, `24h`, `7d`)."""
    seconds = age_seconds_of(value, units="smhd")
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


_DOMAIN = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


def slack_domain(value: str) -> str:
    """`--slack-domain`: `acme`, or `acme.slack.com` / `https://acme.slack.com` pasted whole."""
    domain = value.strip().lower().removeprefix("https://").removesuffix("/")
    domain = domain.removesuffix(".slack.com")
    if not _DOMAIN.fullmatch(domain):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a workspace domain (the `acme` of acme.slack.com)"
        )
    return domain


_USER_ID = re.compile(r"[UW][A-Z0-9]{2,63}")
"""A Slack user id: `U…`, or `W…` for an Enterprise Grid user; capitals and digits."""


def slack_user(value: str) -> str:
    if not _USER_ID.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a Slack user id (like U024BE7LH)")
    return value


def grant_id(value: str) -> str:
    found = value.strip()
    if not 0 < len(found) <= 128:
        raise argparse.ArgumentTypeError(f"{value!r} is not a grant id (like g_0123abcd…)")
    return found


def operator_name(value: str) -> str:
    """`--by`: who acted, as a record keeps it: one line, 1-128 characters."""
    name = " ".join(value.split())
    if not 0 < len(name) <= 128:
        raise argparse.ArgumentTypeError("--by takes a name of 1-128 characters")
    return name


def at_least_one(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return number


def json_value(value: str) -> object:
    """`--value`: any JSON text (`null`, `42`, `{"id": "r1"}`)."""
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"{value!r} is not JSON ({err.msg})") from None
