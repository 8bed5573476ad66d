"""The operator's command line over the database at `DATABASE_URL` (or `--database-url`):
`bot approvals`, `bot grants`, `bot turns`, `bot cancel`, `bot reset`. None calls Slack or a
model.

Each module is one command family (`approvals` and its `--history`, `grants`, `turns`,
`sessions`); `arguments` is
what every operator command takes (argparse, importing neither the engine nor the database
layer, so help answers at once), `output` the one convention they print by (tables, or `--json`
as JSON lines; exit codes 0 / 1 / 2), `stores` what they open, `links` the Slack links they can
build without calling Slack. The command modules are imported only by the command that runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from bot.cli.operator import arguments
from bot.cli.operator.output import OperatorError

COMMANDS = ("approvals", "grants", "turns", "cancel", "reset")


def register(sub: Any) -> None:
    """Every operator command's parser: these five, and `receipts`, `check`, `feedback`,
    `prune`, whose commands live beside the engine's (`bot.cli.ops`, `bot.core.retention`)."""
    arguments.add_parsers(sub)


async def run(args: argparse.Namespace, url: str, redis_url: str | None, prefix: str) -> int:
    """Raises `OperatorError` for a usage error (the caller prints it as one line, exit 2),
    and the store's own errors (unreachable, schema) for the caller to report."""
    from bot.cli.operator import approval_history, approvals, grants, sessions, turns
    from bot.cli.operator.stores import databases

    async with databases(url) as dbs:
        if args.command == "approvals" and args.history:
            return await approval_history.history_command(args, dbs)
        if args.command == "approvals":
            return await approvals.approvals_command(args, dbs)
        if args.command == "grants":
            return await grants.grants_command(args, dbs)
        if args.command == "turns":
            return await turns.turns_command(args, dbs)
        if args.command == "cancel":
            return await sessions.cancel_command(args, dbs, redis_url, prefix)
        if args.command == "reset":
            return await sessions.reset_command(args, dbs, redis_url, prefix)
    raise OperatorError(f"unknown command {args.command!r}")


__all__ = ["COMMANDS", "OperatorError", "register", "run"]
