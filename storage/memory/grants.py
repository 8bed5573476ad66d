"""`MemoryStore`'s standing grants (`Grants`): the same answers as `storage.sql.grants`, from a
store-level table, each call atomic under the store's one lock as a SQL statement would be.

Grants are kept beside the sessions, not in them: a CHANNEL grant covers every thread of its
channel, and a reset of the session it came from leaves it standing (as in SQL, where
`standing_grants` is no session's table). Records are frozen and normalised on the way in, so
nothing read back aliases what a caller passed in.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from agent.seams import GrantRecord, GrantScope, StepConflictError
from storage.memory.state import RowIds

GrantRows = dict[str, tuple[int, GrantRecord]]
"""grant id -> (row id, grant): the `standing_grants` rows; the row id breaks ties in order."""


def add(rows: GrantRows, ids: RowIds, grant: GrantRecord) -> GrantRecord:
    """As `storage.sql.grants.add`: the approval's grant, inserted unless it has one."""
    for _, stored in rows.values():
        if (stored.session, stored.confirmation_id) == (grant.session, grant.confirmation_id):
            return stored
    if grant.grant_id in rows:
        raise StepConflictError(f"grant {grant.grant_id!r} exists already, for another approval")
    stored = replace(grant, scope=GrantScope(grant.scope))
    rows[grant.grant_id] = (ids.next("standing_grants"), stored)
    return stored


def find(
    rows: GrantRows,
    *,
    tool: str,
    team: str,
    enterprise: str | None,
    speaker: str,
    session: str,
    channel: str | None,
    now: float,
) -> GrantRecord | None:
    """As `storage.sql.grants.find`: the covering grant live at `now` that expires last."""
    covering = [
        (grant.expires_at, row_id, grant)
        for row_id, grant in rows.values()
        if (grant.team, grant.enterprise, grant.tool, grant.speaker)
        == (team, enterprise, tool, speaker)
        and grant.live(now)
        and _covers(grant, session, channel)
    ]
    return max(covering, key=lambda found: found[:2])[2] if covering else None


def _covers(grant: GrantRecord, session: str, channel: str | None) -> bool:
    if grant.scope == GrantScope.THREAD:
        return grant.session == session
    return channel is not None and grant.channel == channel


def listed(rows: GrantRows, team: str | None, live_at: float | None) -> list[GrantRecord]:
    """As `storage.sql.grants.list_grants`: newest first (created, then row id)."""
    kept = [
        (grant.created_at, row_id, grant)
        for row_id, grant in rows.values()
        if (team is None or grant.team == team) and (live_at is None or grant.live(live_at))
    ]
    return [grant for *_, grant in sorted(kept, key=lambda found: found[:2], reverse=True)]


def revoke(rows: GrantRows, grant_id: str, by: str, now: float) -> GrantRecord | None:
    """As `storage.sql.grants.revoke`: the first revocation stands."""
    found = rows.get(grant_id)
    if found is None:
        return None
    row_id, grant = found
    if grant.revoked_at is None:
        grant = replace(grant, revoked_at=now, revoked_by=by)
        rows[grant_id] = (row_id, grant)
    return grant


class GrantMethods:
    """Mixed into `MemoryStore`, which owns the lock, the row ids and the grants table below."""

    _lock: asyncio.Lock
    _ids: RowIds
    _grants: GrantRows

    async def add_grant(self, grant: GrantRecord) -> GrantRecord:
        async with self._lock:
            return add(self._grants, self._ids, grant)

    async def get_grant(self, grant_id: str) -> GrantRecord | None:
        async with self._lock:
            found = self._grants.get(grant_id)
            return None if found is None else found[1]

    async def find_grant(
        self,
        *,
        tool: str,
        team: str,
        enterprise: str | None,
        speaker: str,
        session: str,
        channel: str | None,
        now: float,
    ) -> GrantRecord | None:
        async with self._lock:
            return find(
                self._grants,
                tool=tool,
                team=team,
                enterprise=enterprise,
                speaker=speaker,
                session=session,
                channel=channel,
                now=now,
            )

    async def list_grants(
        self, *, team: str | None = None, live_at: float | None = None
    ) -> list[GrantRecord]:
        async with self._lock:
            return listed(self._grants, team, live_at)

    async def revoke_grant(self, grant_id: str, *, by: str, now: float) -> GrantRecord | None:
        async with self._lock:
            return revoke(self._grants, grant_id, by, now)
