"""`bot db rotate-token-key`: every installed workspace's tokens re-sealed under the first key
of `TOKEN_ENCRYPTION_KEYS`, those still in plain text sealed too.

How a key is rotated: put a new key first in the list (`new,old`) and restart every process
(they seal with the new key and open with both), run this command, then drop the old key. The
command says how many values it moved and how many no key opens: it exits 1 while any are left,
so the old key is only dropped once nothing needs it. Safe beside live processes and to run
again (each row is compare-and-set, `storage.installations.rotation`).
"""

from __future__ import annotations

import sys

from bot.core.settings import ConfigError, Settings

NAME = "rotate-token-key"


async def rotate_command(settings: Settings, url: str) -> int:
    from agent import SchemaMismatchError
    from storage.installations.rotation import reseal_rows
    from storage.sql.dialects import dialect_for
    from storage.sql.store import SqlStore

    try:
        cipher = settings.token_cipher()
    except ConfigError as err:
        print(f"bot db {NAME}: {err}", file=sys.stderr)
        return 2
    # Opening the store checks the schema (revision 0009 widened the token columns).
    try:
        await (await SqlStore.open(url)).close()
    except SchemaMismatchError as err:
        print(f"bot db {NAME}: {err}", file=sys.stderr)
        return 2
    engine = dialect_for(url).create_engine()
    try:
        found = await reseal_rows(engine, cipher)
    finally:
        await engine.dispose()
    print(
        f"installed workspaces' tokens: {found.rotated} re-encrypted under the first key, "
        f"{found.sealed} encrypted (were stored in plain text), {found.current} already under "
        "the first key"
    )
    if found.skipped_rows:
        print(f"{found.skipped_rows} rows changed meanwhile and were left: run it again")
    if found.unreadable:
        print(
            f"{found.unreadable} tokens are sealed under no key of TOKEN_ENCRYPTION_KEYS and were "
            "left as they are: their workspaces are not installed to the bot until they "
            "install again, or until the key that sealed them is put back in the list",
            file=sys.stderr,
        )
    return 1 if found.unreadable or found.skipped_rows else 0
