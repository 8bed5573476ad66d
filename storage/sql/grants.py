"""Transaction bodies for standing grants (`Grants`), and `GrantMethods`, `SqlStore`'s five
methods over them (a mixin, as `MemoryStore` has its ledgers', so `storage.sql.store` stays small).

A grant is not a session's row: a CHANNEL grant covers every thread of its channel, so nothing
here locks a session, and a reset archives no grant. Each write is one statement whose outcome
is decided by the database, so two processes racing on the same grant agree:
- issuing is an INSERT ... ON CONFLICT DO NOTHING (one grant per approval: `session_key`,
  `confirmation_id` are unique), then a read of what is stored: an answer retried after a
  crash, or two surfaces delivering the same click, issue one grant and both callers see it;
- revoking is an UPDATE conditioned on `revoked_at IS NULL`, then a read: the first revocation
  stands, a later one changes nothing and reports the first.
Liveness is checked against the caller's clock in the query (`now < expires_at`), so a grant
lapses without anything having to fire.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from agent.seams import GrantRecord, GrantScope, StepConflictError
from storage.sql.dialects import SqlDialect
from storage.sql.executor import TransactionExecutor
from storage.sql.schema import standing_grants

_G = standing_grants.c


def add(conn: Connection, dialect: SqlDialect, grant: GrantRecord) -> GrantRecord:
    """The body of `add_grant`: insert unless this approval has its grant; return the stored one.

    The conflict clause names no constraint, so it covers both unique ones: on PostgreSQL only
    the constraints an ON CONFLICT names are arbitrated, and two racing inserts of one approval's
    grant would otherwise meet on `grant_id` (checked without arbitration) and one would fail.
    Nothing stored for the approval afterwards means the conflict was a `grant_id` of another
    approval's grant: a caller's mistake (ids are derived from the approval), refused as
    `StepConflictError` rather than answered with someone else's grant."""
    conn.execute(dialect.insert(standing_grants).values(_row(grant)).on_conflict_do_nothing())
    row = conn.execute(
        select(standing_grants).where(
            _G.session_key == grant.session, _G.confirmation_id == grant.confirmation_id
        )
    ).first()
    if row is None:
        raise StepConflictError(f"grant {grant.grant_id!r} exists already, for another approval")
    return _record(row._mapping)


def get(conn: Connection, grant_id: str) -> GrantRecord | None:
    row = conn.execute(select(standing_grants).where(_G.grant_id == grant_id)).first()
    return None if row is None else _record(row._mapping)


def find(
    conn: Connection,
    *,
    tool: str,
    team: str,
    enterprise: str | None,
    speaker: str,
    session: str,
    channel: str | None,
    now: float,
) -> GrantRecord | None:
    """The body of `find_grant`: the covering grant live at `now` that expires last."""
    covers: ColumnElement[bool] = and_(
        _G.scope == GrantScope.THREAD.value, _G.session_key == session
    )
    if channel is not None:  # a call outside any channel is covered by no CHANNEL grant
        covers = or_(covers, and_(_G.scope == GrantScope.CHANNEL.value, _G.channel == channel))
    row = conn.execute(
        select(standing_grants)
        .where(
            _G.team == team,
            _G.tool == tool,
            _G.speaker == speaker,
            # NULL-safe: a grant of a workspace outside any enterprise matches only such calls.
            _G.enterprise.is_(None) if enterprise is None else _G.enterprise == enterprise,
            *_live(now),
            covers,
        )
        .order_by(_G.expires_at.desc(), _G.id.desc())
        .limit(1)
    ).first()
    return None if row is None else _record(row._mapping)


def list_grants(conn: Connection, team: str | None, live_at: float | None) -> list[GrantRecord]:
    query = select(standing_grants)
    if team is not None:
        query = query.where(_G.team == team)
    if live_at is not None:
        query = query.where(*_live(live_at))
    rows = conn.execute(query.order_by(_G.created_at.desc(), _G.id.desc())).all()
    return [_record(row._mapping) for row in rows]


def revoke(conn: Connection, grant_id: str, by: str, now: float) -> GrantRecord | None:
    """The body of `revoke_grant`: only an unrevoked grant changes; returns it as stored."""
    conn.execute(
        update(standing_grants)
        .where(_G.grant_id == grant_id, _G.revoked_at.is_(None))
        .values(revoked_at=now, revoked_by=by)
    )
    return get(conn, grant_id)


def _live(now: float) -> list[ColumnElement[bool]]:
    return [_G.revoked_at.is_(None), _G.expires_at > now]


def _row(grant: GrantRecord) -> dict[str, Any]:
    return {
        "grant_id": grant.grant_id,
        "tool": grant.tool,
        "team": grant.team,
        "enterprise": grant.enterprise,
        "scope": GrantScope(grant.scope).value,
        "session_key": grant.session,
        "channel": grant.channel,
        "speaker": grant.speaker,
        "granted_by": grant.granted_by,
        "confirmation_id": grant.confirmation_id,
        "created_at": grant.created_at,
        "expires_at": grant.expires_at,
        "revoked_at": grant.revoked_at,
        "revoked_by": grant.revoked_by,
    }


def _record(row: Any) -> GrantRecord:
    revoked_at = row["revoked_at"]
    return GrantRecord(
        grant_id=row["grant_id"],
        tool=row["tool"],
        team=row["team"],
        enterprise=row["enterprise"],
        scope=GrantScope(row["scope"]),
        session=row["session_key"],
        channel=row["channel"],
        speaker=row["speaker"],
        granted_by=row["granted_by"],
        confirmation_id=row["confirmation_id"],
        created_at=float(row["created_at"]),
        expires_at=float(row["expires_at"]),
        revoked_at=None if revoked_at is None else float(revoked_at),
        revoked_by=row["revoked_by"],
    )


class GrantMethods:
    """Mixed into `SqlStore`, which owns the executor and dialect below. Issuing and revoking
    are urgent: a person's click waits on each."""

    _x: TransactionExecutor
    _dialect: SqlDialect

    async def add_grant(self, grant: GrantRecord) -> GrantRecord:
        return await self._x.write(lambda c: add(c, self._dialect, grant), urgent=True)

    async def get_grant(self, grant_id: str) -> GrantRecord | None:
        return await self._x.read(lambda c: get(c, grant_id))

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
        return await self._x.read(
            lambda c: find(
                c,
                tool=tool,
                team=team,
                enterprise=enterprise,
                speaker=speaker,
                session=session,
                channel=channel,
                now=now,
            )
        )

    async def list_grants(
        self, *, team: str | None = None, live_at: float | None = None
    ) -> list[GrantRecord]:
        return await self._x.read(lambda c: list_grants(c, team, live_at))

    async def revoke_grant(self, grant_id: str, *, by: str, now: float) -> GrantRecord | None:
        return await self._x.write(lambda c: revoke(c, grant_id, by, now), urgent=True)
