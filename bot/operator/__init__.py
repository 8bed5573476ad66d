"""The operator's command line over the database at `DATABASE_URL` (or `--database-url`):
`bot approvals`, `bot turns`, `bot cancel`, `bot reset`. None calls Slack or a model.

Each module is one command family (`approvals`, `turns`, `sessions`); `output` is the one
convention they print by (tables, or `--json` as JSON lines; exit codes 0 / 1 / 2), `stores`
what they open, `links` the Slack links they can build without calling Slack.
"""

from __future__ import annotations

import argparse
from typing import Any

from bot.operator import approvals, sessions, turns
from bot.operator.output import OperatorError
from bot.operator.stores import databases

COMMANDS = ("approvals", "turns", "cancel", "reset")


def register(sub: Any) -> None:
    approvals.add_parser(sub)
    turns.add_parser(sub)
    sessions.add_parsers(sub)


async def run(args: argparse.Namespace, url: str, redis_url: str | None, prefix: str) -> int:
    """Raises `OperatorError` for a usage error (the caller prints it as one line, exit 2),
    and the store's own errors (unreachable, schema) for the caller to report."""
    async with databases(url) as dbs:
        if args.command == "approvals":
            return await approvals.approvals_command(args, dbs)
        if args.command == "turns":
            return await turns.turns_command(args, dbs)
        if args.command == "cancel":
            return await sessions.cancel_command(args, dbs, redis_url, prefix)
        if args.command == "reset":
            return await sessions.reset_command(args, dbs, redis_url, prefix)
    raise OperatorError(f"unknown command {args.command!r}")


__all__ = ["COMMANDS", "OperatorError", "register", "run"]
