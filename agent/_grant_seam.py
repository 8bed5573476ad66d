"""The store's role for standing grants: "Approve, and allow this again".

A person approving a proposed write of a tool that allows it (`@tool(grantable_for=seconds)`)
may also allow that tool's later calls, in this thread or this channel, from the same speaker,
for a while (at most the tool's limit). Those calls then run without a new request, and the
timeline says which grant let them. A grant is bound to its workspace, lives until
`expires_at` (checked against the clock when it is used, so nothing has to fire for it to
lapse), and can be revoked at once.

Its contract: tests/contract/test_grants_store.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class GrantScope(StrEnum):
    THREAD = "thread"
    """Calls in the same session (a Slack thread) only."""
    CHANNEL = "channel"
    """Calls in any session whose inbound event names the same channel."""


@dataclass(frozen=True, kw_only=True)
class GrantRecord:
    """One standing grant: which tool, where, for whose calls, by whom, until when."""

    grant_id: str
    tool: str
    team: str
    """The workspace it was granted in; it covers nothing in another one."""
    enterprise: str | None
    scope: GrantScope
    session: str
    """The session of the approval it came with; for THREAD scope, the one it covers."""
    channel: str | None
    """For CHANNEL scope, the channel it covers (None for THREAD scope)."""
    speaker: str
    """Whose calls it covers: the attested speaker of the approved call's turn."""
    granted_by: str
    confirmation_id: str
    """The approval it came with (a confirmation of `session`): one grant per approval."""
    created_at: float
    expires_at: float
    revoked_at: float | None = None
    revoked_by: str | None = None

    def live(self, now: float) -> bool:
        return self.revoked_at is None and now < self.expires_at


class Grants(Protocol):
    """Standing grants: issued with an approval, found when a later call is proposed."""

    async def add_grant(self, grant: GrantRecord) -> GrantRecord:
        """Store `grant` unless one for the same approval (`session`, `confirmation_id`) exists;
        returns the stored one (so an answer retried after a crash issues one grant)."""
        ...

    async def get_grant(self, grant_id: str) -> GrantRecord | None: ...

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
        """A grant live at `now` (not revoked, `now < expires_at`) of `tool` in this workspace
        (`team` and `enterprise` both equal) for `speaker` whose scope covers the call: THREAD
        with this `session`, or CHANNEL with this `channel` (never when `channel` is None).
        Of several, the one expiring last; None when none covers it."""
        ...

    async def list_grants(
        self, *, team: str | None = None, live_at: float | None = None
    ) -> list[GrantRecord]:
        """Grants newest first: of one workspace (`team`) or all; with `live_at`, only those
        live then (not revoked, not expired)."""
        ...

    async def revoke_grant(self, grant_id: str, *, by: str, now: float) -> GrantRecord | None:
        """Mark the grant revoked (by, at) unless it is already; returns it as stored after
        (the first revocation stands), or None for an unknown id."""
        ...
