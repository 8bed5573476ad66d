"""`bot`: the command line. Async work runs under `asyncio.run` here and nowhere else, except the
web processes of `bot serve`, whose event loops uvicorn runs (uvloop where installed)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from agent import (
    REDACTED,
    AgentError,
    AssemblyError,
    ModelError,
    SchemaMismatchError,
    StoreUnavailableError,
    password_in_url,
)
from bot.settings import ConfigError, Settings

OPERATOR_COMMANDS = ("approvals", "turns", "cancel", "reset")
"""`bot.operator`'s commands (named here too, so `bot serve` never imports them)."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bot", description="Slack bot on a durable turn engine")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="offline demo: a Slack thread against a local stand-in")
    demo.add_argument("--database-url", default=None, help="default: a fresh SQLite file")
    demo.add_argument(
        "--engine", action="store_true", help="the engine-only demo (one turn, events printed)"
    )
    sandbox = sub.add_parser(
        "sandbox", help="offline web page: a Slack thread view over the stand-in (no token)"
    )
    sandbox.add_argument("--port", type=int, default=3100, help="on 127.0.0.1 (0: any free one)")
    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="apply migrations up to this code's schema")
    upgrade.add_argument("--database-url", default=None)
    current = db_sub.add_parser("current", help="print the schema revision in the database")
    current.add_argument("--database-url", default=None)
    from bot.token_keys import register as register_rotate

    register_rotate(db_sub)
    serve = sub.add_parser("serve", help="HTTP mode: /slack/events and /healthz on PORT")
    serve.add_argument(
        "--offline",
        action="store_true",
        help="no Slack, no Anthropic: a Slack stand-in and the scripted model (BOT_OFFLINE)",
    )
    sub.add_parser("socket", help="Socket Mode (local development, no public URL)")
    sub.add_parser("worker", help="run and render queued turns (for RUN_TURNS=false web)")
    sub.add_parser("clock", help="fire the agent's schedules")
    from bot import operator
    from bot.ops_cli import register
    from bot.retention import register as register_prune

    register(sub)
    operator.register(sub)
    register_prune(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings()
    url = getattr(args, "database_url", None) or settings.database_url
    try:
        return _main(args, settings, url)
    except StoreUnavailableError as err:
        # A mistyped DATABASE_URL or a database that is down: the store's one line naming the
        # database and why (never a driver traceback, nor the URL's password).
        message = str(err)
        for secret in filter(None, [*settings.secrets(), password_in_url(url)]):
            message = message.replace(secret, REDACTED)  # the store hid the URL's; the rest too
        print(f"bot {_name(args)}: {message}", file=sys.stderr)
        return 2


def _name(args: argparse.Namespace) -> str:
    sub = getattr(args, "db_command", None) or getattr(args, "receipts_command", None)
    return f"{args.command} {sub}" if sub else str(args.command)


def _main(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from bot.logs import setup_logging

    quiet = args.command in (
        "demo",
        "sandbox",
        "db",
        "receipts",
        "check",
        "feedback",
        "prune",
        *OPERATOR_COMMANDS,
    )
    setup_logging(
        level="WARNING" if quiet else settings.log_level,
        fmt="text" if quiet else settings.log_format,
        secrets=settings.secrets(),
    )
    if args.command == "demo":
        from bot.demo import run_engine_demo, run_slack_demo

        if args.engine:
            return asyncio.run(run_engine_demo(url))
        return asyncio.run(run_slack_demo(args.database_url))
    if args.command == "sandbox":
        from bot.sandbox.run import run_sandbox

        return asyncio.run(run_sandbox(settings, args.port))
    if args.command == "db":
        from storage import current_revision, upgrade_database

        if args.db_command == "rotate-token-key":
            from bot.token_keys import rotate_command

            return asyncio.run(rotate_command(settings, url))
        if args.db_command == "upgrade":
            asyncio.run(upgrade_database(url))
            print("database schema is up to date")
            return 0
        print(asyncio.run(current_revision(url)) or "(empty database)")
        return 0
    if args.command in ("receipts", "check", "feedback"):
        return _ops(args, settings, url)
    if args.command == "prune":
        from bot.retention import prune_command

        return asyncio.run(prune_command(args, url, settings))
    if args.command in OPERATOR_COMMANDS:
        return _operator(args, settings, url)
    if getattr(args, "offline", False):
        settings = settings.model_copy(update={"offline": True})
    try:
        settings.require(args.command)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    from bot import commands

    runner = {
        "socket": commands.socket_mode,
        "worker": commands.worker,
        "clock": commands.clock,
    }
    try:
        if args.command == "serve" and settings.offline:
            from bot.offline import serve_offline

            return serve_offline(settings)
        if args.command == "serve":
            return commands.serve(settings)
        return asyncio.run(runner[args.command](settings))
    except KeyboardInterrupt:
        return 0
    except (SchemaMismatchError, AssemblyError, ModelError) as err:
        print(f"bot {args.command}: {err}", file=sys.stderr)
        return 2


def _ops(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from agent import load_agent
    from bot.ops_cli import check_command, feedback_command, receipts_command

    try:
        if args.command == "receipts":
            return asyncio.run(receipts_command(args, url))
        if args.command == "feedback":
            return asyncio.run(feedback_command(args, url))
        agent_dir = args.agent_dir or settings.agent_path()
        return asyncio.run(check_command(url, load_agent(agent_dir)))
    except StoreUnavailableError:
        raise  # `main` says which database, and under the full command's name
    except (SchemaMismatchError, AssemblyError, AgentError) as err:
        print(f"bot {args.command}: {err}", file=sys.stderr)
        return 2


def _operator(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from bot import operator

    try:
        return asyncio.run(operator.run(args, url, settings.redis_url, settings.redis_prefix))
    except StoreUnavailableError:
        raise  # `main` says which database
    except (operator.OperatorError, SchemaMismatchError, AgentError) as err:
        print(f"bot {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
