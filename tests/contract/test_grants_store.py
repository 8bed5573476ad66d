"""The `Grants` contract: one grant per approval, however often it is issued; a grant covers a
call only in its workspace, for its tool and speaker, where its scope reaches (its thread, or its
channel when the call names one), and only while it is live (unexpired, unrevoked); of several,
the one expiring last; the first revocation stands. Run against `memory`, `sqlite` and
`postgres`."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from agent import SessionStore
from agent.seams import GrantRecord, GrantScope, StepConflictError
from tests.contract.conftest import Reopen

T0 = 1_000.0
THREAD = "slack:T1:C1:1700000000.000100"
OTHER_THREAD = "slack:T1:C1:1700000000.000200"


def _grant(n: int = 1, **kw: Any) -> GrantRecord:
    fields: dict[str, Any] = {
        "grant_id": f"g_{n}",
        "tool": "reserve_inventory",
        "team": "T1",
        "enterprise": None,
        "scope": GrantScope.THREAD,
        "session": THREAD,
        "channel": None,
        "speaker": "UA",
        "granted_by": "UBOSS",
        "confirmation_id": f"c_{n}",
        "created_at": T0 + n,
        "expires_at": T0 + 600,
        **kw,
    }
    return GrantRecord(**fields)


def _channel_grant(n: int = 1, channel: str = "C1", **kw: Any) -> GrantRecord:
    return _grant(n, scope=GrantScope.CHANNEL, channel=channel, **kw)


async def _revoke(store: SessionStore, grant: GrantRecord, by: str, now: float) -> GrantRecord:
    revoked = await store.revoke_grant(grant.grant_id, by=by, now=now)
    assert revoked is not None
    return revoked


async def _find(store: SessionStore, **kw: Any) -> GrantRecord | None:
    """`find_grant` for the call `_grant()` covers, with `kw` changed."""
    call: dict[str, Any] = {
        "tool": "reserve_inventory",
        "team": "T1",
        "enterprise": None,
        "speaker": "UA",
        "session": THREAD,
        "channel": "C1",
        "now": T0 + 100,
        **kw,
    }
    return await store.find_grant(**call)


async def test_a_grant_reads_back_as_added(store: SessionStore) -> None:
    grant = _grant(enterprise="E1", scope=GrantScope.CHANNEL, channel="C1")
    assert await store.add_grant(grant) == grant
    got = await store.get_grant("g_1")
    assert got == grant
    assert got is not None
    assert got.scope is GrantScope.CHANNEL
    assert await store.get_grant("g_2") is None


async def test_one_approval_issues_one_grant_the_first(store: SessionStore) -> None:
    """An answer retried after a crash (or delivered twice) issues one grant: the second add,
    whatever it carries, returns the stored first one and writes nothing."""
    first = _grant(1)
    assert await store.add_grant(first) == first
    again = _grant(2, confirmation_id=first.confirmation_id, expires_at=T0 + 9_000)
    assert await store.add_grant(again) == first
    assert await store.add_grant(first) == first
    assert await store.list_grants() == [first]
    assert await store.get_grant(again.grant_id) is None
    # The same confirmation id in another session is another approval.
    elsewhere = _grant(3, confirmation_id=first.confirmation_id, session=OTHER_THREAD)
    assert await store.add_grant(elsewhere) == elsewhere
    assert len(await store.list_grants()) == 2


async def test_a_grant_id_of_another_approval_is_refused(store: SessionStore) -> None:
    first = _grant(1)
    await store.add_grant(first)
    with pytest.raises(StepConflictError):
        await store.add_grant(_grant(1, confirmation_id="c_other"))
    assert await store.list_grants() == [first]


async def test_two_adds_for_one_approval_at_once_issue_one_grant(
    store: SessionStore, reopen: Reopen
) -> None:
    """Two processes issuing the same approval's grant at once (two surfaces delivering one
    click): both get the one stored grant."""
    other = await reopen()
    for n in range(5):
        a = _grant(n, confirmation_id=f"race_{n}", grant_id=f"g_race_{n}")
        b = replace(a, granted_by="USOMEONE")
        got_a, got_b = await asyncio.gather(store.add_grant(a), other.add_grant(b))
        assert got_a == got_b
        assert got_a in (a, b)
    assert len(await store.list_grants()) == 5


async def test_a_thread_grant_covers_its_thread_only(store: SessionStore) -> None:
    grant = await store.add_grant(_grant())
    assert await _find(store) == grant
    assert await _find(store, channel=None) == grant  # a thread grant needs no channel
    assert await _find(store, channel="C2") == grant
    assert await _find(store, session=OTHER_THREAD) is None


async def test_a_channel_grant_covers_its_channel_only_and_never_no_channel(
    store: SessionStore,
) -> None:
    grant = await store.add_grant(_channel_grant(channel="C1"))
    assert await _find(store) == grant
    assert await _find(store, session=OTHER_THREAD) == grant
    assert await _find(store, channel="C2") is None
    assert await _find(store, channel=None) is None
    assert await _find(store, session=OTHER_THREAD, channel=None) is None


async def test_a_grant_covers_nothing_in_another_workspace(store: SessionStore) -> None:
    plain = await store.add_grant(_channel_grant(1))
    assert await _find(store) == plain
    assert await _find(store, team="T2") is None
    assert await _find(store, enterprise="E1") is None

    in_enterprise = await store.add_grant(_channel_grant(2, team="T9", enterprise="E1"))
    assert await _find(store, team="T9", enterprise="E1") == in_enterprise
    assert await _find(store, team="T9", enterprise=None) is None
    assert await _find(store, team="T9", enterprise="E2") is None
    assert await _find(store, team="T1", enterprise="E1") is None


async def test_a_grant_covers_only_its_speaker_and_tool(store: SessionStore) -> None:
    grant = await store.add_grant(_grant())
    assert await _find(store) == grant
    assert await _find(store, speaker="UB") is None
    assert await _find(store, speaker="UBOSS") is None  # the granter is not covered
    assert await _find(store, tool="delete_inventory") is None


async def test_an_expired_grant_covers_nothing(store: SessionStore) -> None:
    grant = await store.add_grant(_grant(expires_at=T0 + 600))
    assert await _find(store, now=T0 + 599.5) == grant
    assert await _find(store, now=T0 + 600) is None
    assert await _find(store, now=T0 + 601) is None
    assert await store.get_grant(grant.grant_id) == grant  # lapsed, not deleted


async def test_a_revoked_grant_covers_nothing(store: SessionStore) -> None:
    grant = await store.add_grant(_channel_grant())
    assert await _find(store) == grant
    await store.revoke_grant(grant.grant_id, by="UBOSS", now=T0 + 50)
    assert await _find(store) is None
    assert await _find(store, now=T0 + 10) is None  # revoked is revoked, whatever the clock


async def test_of_two_covering_grants_the_later_expiring_is_found(store: SessionStore) -> None:
    longer = await store.add_grant(_grant(1, expires_at=T0 + 900))
    shorter = await store.add_grant(_channel_grant(2, expires_at=T0 + 300))
    assert await _find(store) == longer
    assert await _find(store, now=T0 + 950) is None
    latest = await store.add_grant(_channel_grant(3, expires_at=T0 + 1_200))
    assert await _find(store) == latest
    await store.revoke_grant(latest.grant_id, by="UA", now=T0 + 10)
    assert await _find(store) == longer
    assert await _find(store, session=OTHER_THREAD) == shorter


async def test_list_grants_newest_first_by_team_and_liveness(store: SessionStore) -> None:
    old = await store.add_grant(_grant(1, created_at=T0 + 1, expires_at=T0 + 100))
    other_team = await store.add_grant(_grant(2, team="T2", created_at=T0 + 2))
    revoked = await store.add_grant(_channel_grant(3, created_at=T0 + 3))
    newest = await store.add_grant(_grant(4, created_at=T0 + 4))
    # Added after, created at the same time as `newest`: the later row is newer.
    tied = await store.add_grant(_grant(5, created_at=T0 + 4))
    revoked = await _revoke(store, revoked, "UBOSS", T0 + 5)

    assert await store.list_grants() == [tied, newest, revoked, other_team, old]
    assert await store.list_grants(team="T1") == [tied, newest, revoked, old]
    assert await store.list_grants(team="T2") == [other_team]
    assert await store.list_grants(team="T3") == []
    assert await store.list_grants(live_at=T0 + 50) == [tied, newest, other_team, old]
    assert await store.list_grants(live_at=T0 + 100) == [tied, newest, other_team]
    assert await store.list_grants(team="T1", live_at=T0 + 100) == [tied, newest]
    assert await store.list_grants(team="T1", live_at=T0 + 600) == []


async def test_the_first_revocation_stands(store: SessionStore) -> None:
    grant = await store.add_grant(_grant())
    first = await store.revoke_grant(grant.grant_id, by="UBOSS", now=T0 + 20)
    assert first == replace(grant, revoked_at=T0 + 20, revoked_by="UBOSS")
    second = await store.revoke_grant(grant.grant_id, by="UA", now=T0 + 30)
    assert second == first
    assert await store.get_grant(grant.grant_id) == first
    assert await store.list_grants() == [first]


async def test_revoking_an_unknown_grant_finds_none(store: SessionStore) -> None:
    kept = await store.add_grant(_grant())
    assert await store.revoke_grant("g_nowhere", by="UBOSS", now=T0 + 20) is None
    assert await store.get_grant("g_nowhere") is None
    assert await store.list_grants() == [kept]


async def test_grants_survive_a_reopen(store: SessionStore, reopen: Reopen) -> None:
    kept = await store.add_grant(_channel_grant(1))
    revoked = await store.add_grant(_grant(2))
    revoked = await _revoke(store, revoked, "UA", T0 + 5)
    other = await reopen()
    assert await other.get_grant(kept.grant_id) == kept
    assert await other.list_grants() == [revoked, kept]
    assert await _find(other) == kept
    assert await other.add_grant(_grant(3, confirmation_id=kept.confirmation_id)) == kept
