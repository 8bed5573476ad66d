"""`bot`: the command line. Async work runs under `asyncio.run` here and nowhere else, except the
web processes of `bot serve`, whose event loops uvicorn runs (uvloop where installed).

Reading the arguments imports nothing but argparse and the commands' argument modules, so
`bot --help`, `bot <command> --help` and a usage error answer at once; the engine, the
settings, SQLAlchemy and the Slack app are imported once a command is known to run, and each
command imports only what it uses (`bench/cli_startup.py` measures it).

Every command that works on an existing database checks it first (`storage.require_database`):
a malformed URL, an unreachable server, a SQLite file that does not exist or a schema below this
code's is one line on stderr and exit 2, and nothing is created, not a file, not a folder.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from bot.core.settings import Settings

T = TypeVar("T")

OPERATOR_COMMANDS = ("approvals", "grants", "turns", "cancel", "reset")
"""`bot.cli.operator`'s commands (named here too, so `bot serve` never imports them)."""

SERVING_COMMANDS = ("serve", "socket", "worker", "clock")
"""The long-running processes (`bot.cli.commands`)."""

QUIET_COMMANDS = ("demo", "sandbox", "db", "receipts", "check", "feedback", "prune")
"""Commands that print for a person: their logs are warnings, as text."""

SERVING_EXIT_CODES = (
    "exit codes: 0 stopped by a signal (SIGTERM, Ctrl-C); 2 a configuration error, told in one "
    "line (a missing or invalid setting, the database unreachable, missing or not migrated, an "
    "agent that does not assemble)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bot",
        description="Slack bot on a durable turn engine",
        epilog="exit codes: 0 done; 1 done, with something a script should notice (each "
        "command's --help says what); 2 a usage or configuration error, told in one line.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo",
        help="offline demo: a Slack thread against a local stand-in",
        description="The offline demo: the bot against a local stand-in for Slack's Web API, "
        "with the scripted model; --engine runs one turn through the engine alone and prints "
        "its events. No token, no network.",
        epilog="exit codes: 0 the story ran; 1 (--engine) the turn did not end as scripted; 2 "
        "the database given is malformed or unreachable.",
    )
    demo.add_argument(
        "--database-url",
        default=None,
        metavar="URL",
        help="default: a fresh SQLite file in a temporary folder, deleted at exit",
    )
    demo.add_argument(
        "--engine", action="store_true", help="the engine-only demo (one turn, events printed)"
    )
    sandbox = sub.add_parser(
        "sandbox",
        help="offline web page: a Slack thread view over the stand-in (no token)",
        description="A local web page that looks like a Slack workspace, over the stand-in and "
        "the scripted model, on a temporary SQLite database (deleted at exit).",
        epilog="exit codes: 0 stopped (Ctrl-C); 2 the port cannot be listened on.",
    )
    sandbox.add_argument("--port", type=int, default=3100, help="on 127.0.0.1 (0: any free one)")
    _db_parsers(sub)
    serving = {
        "serve": (
            "HTTP mode: /slack/events and /healthz on PORT",
            "Serve Slack's events, interactivity and slash command over HTTP (POST "
            "/slack/events), /healthz and /readyz, and with API_TOKENS the HTTP turn API, in "
            "WEB_CONCURRENCY processes; with RUN_TURNS=true (the default) it runs the turns too.",
        ),
        "socket": (
            "Socket Mode (local development, no public URL)",
            "Take Slack's events over a Socket Mode websocket (needs SLACK_APP_TOKEN): no "
            "public URL. Turns run in this process.",
        ),
        "worker": (
            "run and render queued turns (for RUN_TURNS=false web)",
            "Run the turns web processes queued (RUN_TURNS=false on them) and render them to "
            "Slack; any number of workers may run.",
        ),
        "clock": (
            "fire the agent's schedules",
            "Fire the agent's schedules, expire the requests nobody answered in time, and with "
            "PRUNE_OLDER_THAN prune old history; several clocks may run, each fire happens once.",
        ),
    }
    parsers: dict[str, Any] = {}
    for name, (summary, description) in serving.items():
        epilog = SERVING_EXIT_CODES + (
            "; also 2 when Slack refuses SLACK_APP_TOKEN or Socket Mode is turned off."
            if name == "socket"
            else "."
        )
        parsers[name] = sub.add_parser(name, help=summary, description=description, epilog=epilog)
    parsers["serve"].add_argument(
        "--offline",
        action="store_true",
        help="no Slack, no Anthropic: a Slack stand-in and the scripted model (BOT_OFFLINE)",
    )
    from bot.cli import operator

    operator.register(sub)
    return parser


def _db_parsers(sub: Any) -> None:
    from bot.cli.operator.arguments import DATABASE_URL_HELP

    upgrade_codes = (
        "0 done (created, upgraded, or already at this code's revision); 2 the database URL "
        "malformed or unreachable, or the database migrated by newer code"
    )
    current_codes = (
        "0 printed (an empty database too); 2 the database URL malformed or unreachable, or "
        "a SQLite file that does not exist"
    )
    db = sub.add_parser(
        "db",
        help="database schema",
        description="The database schema: apply this code's migrations, or show the revision; "
        "re-encrypt the installed workspaces' tokens under a new key.",
        epilog=f"exit codes: upgrade: {upgrade_codes}; current: {current_codes}; "
        "rotate-token-key: see its --help.",
    )
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser(
        "upgrade",
        help="apply migrations up to this code's schema",
        description="Apply the migrations up to this code's schema revision and say what was "
        "done; a SQLite file (and its folder) is created if missing.",
        epilog=f"exit codes: {upgrade_codes}.",
    )
    upgrade.add_argument("--database-url", default=None, metavar="URL", help=DATABASE_URL_HELP)
    current = db_sub.add_parser(
        "current",
        help="print the schema revision in the database",
        description="Print the database's schema revision, or (empty database); creates nothing.",
        epilog=f"exit codes: {current_codes}.",
    )
    current.add_argument("--database-url", default=None, metavar="URL", help=DATABASE_URL_HELP)
    rotate = db_sub.add_parser(
        "rotate-token-key",
        help="re-encrypt installed workspaces' tokens under the first TOKEN_ENCRYPTION_KEYS",
        description="Re-encrypt every installed workspace's tokens under the first key of "
        "TOKEN_ENCRYPTION_KEYS (tokens still in plain text are encrypted too); safe beside live "
        "processes and to run again.",
        epilog="exit codes: 0 every token is under the first key; 1 some token no key opens, "
        "or a row changed meanwhile (run it again); 2 TOKEN_ENCRYPTION_KEYS missing or "
        "malformed, or the database malformed, unreachable, missing or not migrated.",
    )
    rotate.add_argument("--database-url", default=None, metavar="URL", help=DATABASE_URL_HELP)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Only now: `--help` and a usage error have exited inside `parse_args` without either.
    from pydantic import ValidationError

    from agent import REDACTED, SchemaMismatchError, StoreUnavailableError, password_in_url
    from bot.core.settings import Settings, invalid_settings
    from storage import DatabaseUrlError

    try:
        settings = Settings()
    except ValidationError as err:  # a value no setting takes: one line, never the value
        print(f"bot {_name(args)}: {invalid_settings(err)}", file=sys.stderr)
        return 2
    given = getattr(args, "database_url", None)
    url = given or settings.database_url
    try:
        return _main(args, settings, url)
    except DatabaseUrlError as err:
        # Never the URL itself: a malformed one may hold its password anywhere.
        source = "--database-url" if given else "DATABASE_URL"
        print(
            f"bot {_name(args)}: {source} is not a database URL it can open: {err}", file=sys.stderr
        )
        return 2
    except StoreUnavailableError as err:
        # A mistyped DATABASE_URL or a database that is down: the store's one line naming the
        # database and why (never a driver traceback, nor the URL's password).
        message = str(err)
        for secret in filter(None, [*settings.secrets(), password_in_url(url)]):
            message = message.replace(secret, REDACTED)  # the store hid the URL's; the rest too
        print(f"bot {_name(args)}: {message}", file=sys.stderr)
        return 2
    except SchemaMismatchError as err:
        print(f"bot {_name(args)}: {err}", file=sys.stderr)
        return 2


def _name(args: argparse.Namespace) -> str:
    sub = getattr(args, "db_command", None) or getattr(args, "receipts_command", None)
    return f"{args.command} {sub}" if sub else str(args.command)


def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    import asyncio  # here: `bot --help` runs no loop, and importing asyncio would double its time

    return asyncio.run(coroutine)


def _existing(url: str) -> None:
    """The database must be there, at this code's schema; raises what `main` reports."""
    from storage import require_database

    _run(require_database(url))


def _main(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from bot.core.logs import setup_logging

    quiet = args.command in (*QUIET_COMMANDS, *OPERATOR_COMMANDS)
    setup_logging(
        level="WARNING" if quiet else settings.log_level,
        fmt="text" if quiet else settings.log_format,
        secrets=settings.secrets(),
    )
    if args.command == "demo":
        from bot.cli.demo import run_engine_demo, run_slack_demo

        if args.engine:
            return _run(run_engine_demo(args.database_url))
        return _run(run_slack_demo(args.database_url))
    if args.command == "sandbox":
        from bot.cli.sandbox.run import run_sandbox

        return _run(run_sandbox(settings, args.port))
    if args.command == "db":
        return _db(args, settings, url)
    if args.command in SERVING_COMMANDS:
        return _serving(args, settings, url)
    _existing(url)
    if args.command in ("receipts", "check", "feedback"):
        return _ops(args, settings, url)
    if args.command == "prune":
        from bot.core.retention import prune_command

        return _run(prune_command(args, url, settings))
    return _operator(args, settings, url)


def _db(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from storage import current_revision, upgrade_database

    if args.db_command == "rotate-token-key":
        from bot.cli.token_keys import rotate_command

        _existing(url)
        return _run(rotate_command(settings, url))
    if args.db_command == "current":  # reads the database as it is; a missing file is an error
        print(_run(current_revision(url)) or "(empty database)")
        return 0
    done = _run(upgrade_database(url))
    if done.before == done.after:
        print(f"the schema is already at revision {done.after}, this code's, in {done.database}")
    elif done.before is None:
        print(f"created the schema at revision {done.after} in {done.database}")
    else:
        print(f"upgraded the schema from revision {done.before} to {done.after} in {done.database}")
    return 0


def _serving(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from agent import AssemblyError, ModelError, SchemaMismatchError
    from bot.core.ops_server import OpsPortError
    from bot.core.settings import ConfigError

    if getattr(args, "offline", False):
        settings = settings.model_copy(update={"offline": True})
    try:
        settings.require(args.command)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    if not (args.command == "serve" and settings.offline):
        _existing(url)  # offline, `bot serve` migrates its own SQLite file (`bot.cli.offline`)
    from bot.cli import commands

    runner = {
        "socket": commands.socket_mode,
        "worker": commands.worker,
        "clock": commands.clock,
    }
    try:
        if args.command == "serve" and settings.offline:
            from bot.cli.offline import serve_offline

            return serve_offline(settings)
        if args.command == "serve":
            return commands.serve(settings)
        return _run(runner[args.command](settings))
    except KeyboardInterrupt:
        return 0
    except (SchemaMismatchError, AssemblyError, ModelError, OpsPortError) as err:
        print(f"bot {args.command}: {err}", file=sys.stderr)
        return 2


def _ops(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from agent import (
        AgentError,
        AssemblyError,
        SchemaMismatchError,
        StoreUnavailableError,
        load_agent,
    )
    from bot.cli.ops import check_command, feedback_command, receipts_command

    try:
        if args.command == "receipts":
            return _run(receipts_command(args, url))
        if args.command == "feedback":
            return _run(feedback_command(args, url))
        agent_dir = args.agent_dir or settings.agent_path()
        return _run(check_command(url, load_agent(agent_dir)))
    except StoreUnavailableError:
        raise  # `main` says which database, and under the full command's name
    except (SchemaMismatchError, AssemblyError, AgentError) as err:
        print(f"bot {_name(args)}: {err}", file=sys.stderr)
        return 2


def _operator(args: argparse.Namespace, settings: Settings, url: str) -> int:
    from agent import AgentError, SchemaMismatchError, StoreUnavailableError
    from bot.cli import operator

    try:
        return _run(operator.run(args, url, settings.redis_url, settings.redis_prefix))
    except StoreUnavailableError:
        raise  # `main` says which database
    except (operator.OperatorError, SchemaMismatchError, AgentError) as err:
        print(f"bot {args.command}: {err}", file=sys.stderr)
        return 2


def run() -> None:
    """The `bot` console script, and `python -m bot`: `main`, then the process ends at once.

    Once the command is done, the exit handlers run (logs flushed,
    temporary folders removed) and the process exits without the interpreter's teardown, which
    for the six hundred modules an operator command imports costs about a fifth of the command's
    time and does nothing an exiting process needs. Threads still running are waited for first,
    as an ordinary exit waits; `--help` and usage errors (argparse's `SystemExit`) and an
    exception exit the ordinary way."""
    code = main()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()  # as the interpreter's exit waits (asyncio.run's executor shutdown)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`bot turns | head`)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
