"""Re-sealing the stored tokens: plain ones at every start, all of them on a key rotation.

Both walk the raw tables (plain `Text` columns, `schema.py`), so what they read and compare is
exactly what is stored. Each row is updated only if its secret columns still hold what was read
(compare and set): two processes starting at once, or a rotation beside a live install, never
overwrite a token written meanwhile; the loser's row is simply left to the winner.

- `seal_plain_rows`: values written before encryption at rest (no `fernet:` mark) are sealed
  under the first key. Cheap when there are none: the rows are picked by SQL.
- `reseal_rows`: every value not already under the first key is sealed under it (rotation);
  values no key opens are counted and left as they are (their workspace installs again, or the
  key that sealed them is put back in the list).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import RowMapping, Table, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from storage.installations.schema import SECRET_COLUMNS, slack_bots, slack_installations
from storage.installations.sealing import SEALED_PREFIX, TokenCipher, UnreadableTokenError

TOKEN_TABLES = (slack_installations, slack_bots)
BATCH = 200
"""Rows updated per transaction: short transactions, so live installs are not held up."""


@dataclass
class Resealed:
    """What a walk found, counted by stored value (a row holds up to five)."""

    current: int = 0
    """Already sealed under the first key: untouched."""
    rotated: int = 0
    """Sealed under another key of the list, now under the first."""
    sealed: int = 0
    """Stored in plain text, now sealed."""
    unreadable: int = 0
    """Sealed under no key of the list: left as they are."""
    skipped_rows: int = 0
    """Rows changed or deleted while the walk ran: left to whoever wrote them."""


async def seal_plain_rows(engine: AsyncEngine, cipher: TokenCipher) -> Resealed:
    return await _walk(engine, cipher, plain_only=True)


async def reseal_rows(engine: AsyncEngine, cipher: TokenCipher) -> Resealed:
    return await _walk(engine, cipher, plain_only=False)


async def _walk(engine: AsyncEngine, cipher: TokenCipher, *, plain_only: bool) -> Resealed:
    found = Resealed()
    for table in TOKEN_TABLES:
        secrets = [table.c[name] for name in SECRET_COLUMNS[table.name]]
        query = select(table.c.id, *secrets).order_by(table.c.id)
        if plain_only:
            query = query.where(
                or_(*(and_(c.is_not(None), c.not_like(f"{SEALED_PREFIX}%")) for c in secrets))
            )
        async with engine.connect() as conn:
            rows = list((await conn.execute(query)).mappings())
        for start in range(0, len(rows), BATCH):
            async with engine.begin() as conn:
                for row in rows[start : start + BATCH]:
                    changes, rotated, sealed = _changes(row, table.name, cipher, found)
                    if not changes:
                        continue
                    if await _compare_and_set(conn, table, row, changes):
                        found.rotated += rotated
                        found.sealed += sealed
                    else:
                        found.skipped_rows += 1
    return found


def _changes(
    row: RowMapping, table: str, cipher: TokenCipher, found: Resealed
) -> tuple[dict[str, str], int, int]:
    """The row's values to write, and how many of them are rotated and newly sealed (counted
    once written); values already current or unreadable are counted in `found` here."""
    changes: dict[str, str] = {}
    rotated = sealed = 0
    for name in SECRET_COLUMNS[table]:
        stored = row[name]
        if stored is None:
            continue
        if cipher.under_first_key(stored):
            found.current += 1
            continue
        try:
            changes[name] = cipher.reseal(stored)
        except UnreadableTokenError:
            found.unreadable += 1
            continue
        if cipher.is_sealed(stored):
            rotated += 1
        else:
            sealed += 1
    return changes, rotated, sealed


async def _compare_and_set(
    conn: AsyncConnection, table: Table, row: RowMapping, changes: dict[str, str]
) -> bool:
    unchanged = [table.c[name] == row[name] for name in changes]
    done = await conn.execute(
        table.update().where(and_(table.c.id == row["id"], *unchanged)).values(**changes)
    )
    return bool(done.rowcount == 1)
