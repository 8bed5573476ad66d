"""`bot`: the command line. Async work runs under `asyncio.run` here and nowhere else."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from bot.settings import Settings


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bot", description="Slack bot on a durable turn engine")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the offline demo turn (SQLite, scripted model)")
    demo.add_argument("--database-url", default=None, help="default: DATABASE_URL or SQLite")
    db = sub.add_parser("db", help="database schema")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    upgrade = db_sub.add_parser("upgrade", help="apply migrations up to this code's schema")
    upgrade.add_argument("--database-url", default=None)
    current = db_sub.add_parser("current", help="print the schema revision in the database")
    current.add_argument("--database-url", default=None)
    for name in ("serve", "socket", "clock"):
        sub.add_parser(name, help=f"{name} (not configured yet)")
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    settings = Settings()
    url = getattr(args, "database_url", None) or settings.database_url
    if args.command == "demo":
        from bot.demo import run_demo

        return asyncio.run(run_demo(url))
    if args.command == "db":
        from storage import current_revision, upgrade_database

        if args.db_command == "upgrade":
            asyncio.run(upgrade_database(url))
            print("database schema is up to date")
            return 0
        print(asyncio.run(current_revision(url)) or "(empty database)")
        return 0
    print(
        f"bot {args.command}: not configured yet — the Slack surface is not built in this "
        "version; run `bot demo` for the offline engine demo",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
