"""A database's whole content as text, the way someone holding a dump of it would see it.

SQLite: the stdlib's `iterdump` (every table's schema and rows, as SQL), run on a thread.
PostgreSQL: `pg_dump` (a subprocess) where installed; else every column of every row of every
table, read with a plain connection. Neither goes through the bot's code, so what they show is
what is stored.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3

from sqlalchemy import MetaData, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine


async def dump(url: str) -> str:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return await asyncio.to_thread(_sqlite_dump, str(parsed.database))
    if shutil.which("pg_dump"):
        return await _pg_dump(url)
    return await _every_row(url)


def _sqlite_dump(path: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


async def _pg_dump(url: str) -> str:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    process = await asyncio.create_subprocess_exec(
        "pg_dump",
        "--no-owner",
        f"--dbname={conninfo}",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err.decode()
    return out.decode()


async def _every_row(url: str) -> str:
    engine = create_async_engine(url)
    lines: list[str] = []
    try:
        async with engine.connect() as conn:
            tables = MetaData()
            await conn.run_sync(tables.reflect)
            for table in tables.sorted_tables:
                for row in await conn.execute(select(table)):
                    lines.append(f"{table.name}: {tuple(row)!r}")
    finally:
        await engine.dispose()
    return "\n".join(lines)
