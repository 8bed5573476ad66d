"""`bot grants`, run as an operator runs it (a subprocess of `bot.cli.main`) against SQLite and
PostgreSQL: the live standing grants of every workspace (a real one, issued by an approval with
`allow_again`), `--all` with revoked and expired ones and their states, in text and `--json`;
`--revoke` as an operator (recording `--by` or "operator"), after which the grant covers no
call; revoking one no longer live is exit 1, an unknown id a one-line exit 2."""

from __future__ import annotations

import json
import time
from typing import Any

from agent import (
    Agent,
    AllowAgain,
    GrantRecord,
    GrantScope,
    InboundEvent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    Speaker,
    ToolCall,
    TurnStatus,
    tool,
)
from storage import SqlStore
from tests.support import children

S1 = "slack:T1:C1:1700000000.000100"
HOUR = 3600.0


async def _bot(*args: str) -> children.Ran:
    return await children.run("bot.cli.main", *args)


def _lines(done: children.Ran) -> list[dict[str, Any]]:
    assert done.stderr == "", done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _one_line_error(done: children.Ran) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("bot grants: "), line
    return line


@tool(effect="write", confirmation="required", grantable_for=86_400)
async def reserve(sku: str) -> dict[str, str]:
    """Reserve stock (approved once; maybe allowed again for up to a day)."""
    return {"reserved": sku}


async def _granted(store: SqlStore) -> GrantRecord:
    """U1 asks for a reservation in channel C1 and approves it, allowing it again there."""
    agent = Agent(name="a", instructions="x", tools=[reserve])
    call = ToolCall(id="c-reserve", name="reserve", input={"sku": "mug"})
    model = ScriptedModel([ScriptedReply(tool_calls=[call]), ScriptedReply(text="done")])
    said = InboundEvent(
        source="slack",
        text="reserve a mug",
        user=Speaker(id="U1", attested=True),
        context={"team": "T1", "channel": "C1"},
    )
    async with Runtime(store, model, agent=agent, poll_interval=0.02) as rt:
        session = rt.session(agent, S1)
        await session.result(await session.start(said, turn_id="t-reserve"))
        [proposal] = await session.confirmations()
        acting = await session.confirm(
            proposal.confirmation_id,
            True,
            by="U1",
            principal={"team": "T1", "user": "U1"},
            allow_again=AllowAgain(scope=GrantScope.CHANNEL, seconds=HOUR),
        )
        assert (await session.result(acting)).status == TurnStatus.COMPLETED
    [grant] = await store.list_grants()
    return grant


async def _stored(store: SqlStore, grant_id: str, *, created: float, seconds: float) -> None:
    await store.add_grant(
        GrantRecord(
            grant_id=grant_id,
            tool="reserve",
            team="T2",
            enterprise="E2",
            scope=GrantScope.THREAD,
            session=f"slack:T2:C2:{created:.6f}",
            channel=None,
            speaker="U2",
            granted_by="U3",
            confirmation_id=f"confirm-{grant_id}",
            created_at=created,
            expires_at=created + seconds,
        )
    )


async def test_grants_lists_the_live_ones_and_with_all_every_one_with_its_state(
    sql_store: SqlStore, sql_url: str
) -> None:
    live = await _granted(sql_store)
    now = time.time()
    await _stored(sql_store, "g_expired", created=now - 2 * HOUR, seconds=HOUR)
    await _stored(sql_store, "g_revoked", created=now - 60, seconds=HOUR)
    await sql_store.revoke_grant("g_revoked", by="U2", now=now - 30)

    listed = await _bot("grants", "--json", "--database-url", sql_url)
    assert listed.returncode == 0, listed.stderr
    [only] = _lines(listed)
    assert {k: only[k] for k in ("grant_id", "state", "tool", "team", "scope", "channel")} == {
        "grant_id": live.grant_id,
        "state": "live",
        "tool": "reserve",
        "team": "T1",
        "scope": "channel",
        "channel": "C1",
    }
    assert (only["speaker"], only["granted_by"], only["session"]) == ("U1", "U1", S1)
    assert 0 < only["expires_in_seconds"] <= HOUR
    assert only["revoked_at"] is None

    every = await _bot("grants", "--all", "--json", "--database-url", sql_url)
    assert every.returncode == 0, every.stderr
    states = {r["grant_id"]: r["state"] for r in _lines(every)}
    assert states == {live.grant_id: "live", "g_expired": "expired", "g_revoked": "revoked"}
    [revoked] = [r for r in _lines(every) if r["grant_id"] == "g_revoked"]
    assert revoked["revoked_by"] == "U2"
    assert revoked["revoked_at"].endswith("+00:00")

    text = await _bot("grants", "--all", "--database-url", sql_url)
    assert text.returncode == 0, text.stderr
    header, *rows = text.stdout.splitlines()
    assert header.split()[:3] == ["GRANT", "STATE", "TOOL"]
    assert len(rows) == 3
    [row] = [r for r in rows if r.startswith(live.grant_id)]
    assert row.split()[1:5] == ["live", "reserve", "T1", "U1"]
    assert row.endswith("channel C1")
    assert any(r.startswith("g_expired") and " expired " in r for r in rows)


async def test_an_operator_revokes_a_grant_and_it_covers_nothing_after(
    sql_store: SqlStore, sql_url: str
) -> None:
    grant = await _granted(sql_store)
    now = time.time()
    await _stored(sql_store, "g_expired", created=now - 2 * HOUR, seconds=HOUR)
    await _stored(sql_store, "g_other", created=now, seconds=HOUR)

    revoked = await _bot(
        "grants",
        "--revoke",
        grant.grant_id,
        "--by",
        "ops-dana",
        "--json",
        "--database-url",
        sql_url,
    )
    assert revoked.returncode == 0, revoked.stderr
    [done] = _lines(revoked)
    assert (done["action"], done["revoked"], done["state"]) == ("revoke", True, "revoked")
    assert done["revoked_by"] == "ops-dana"
    stored = await sql_store.get_grant(grant.grant_id)
    assert stored is not None
    assert stored.revoked_by == "ops-dana"
    covering = await sql_store.find_grant(
        tool="reserve",
        team="T1",
        enterprise=None,
        speaker="U1",
        session=S1,
        channel="C1",
        now=time.time(),
    )
    assert covering is None

    default_by = await _bot("grants", "--revoke", "g_other", "--database-url", sql_url)
    assert default_by.returncode == 0, default_by.stderr
    assert default_by.stdout.startswith("revoked g_other by operator: reserve for U2 in thread ")
    other = await sql_store.get_grant("g_other")
    assert other is not None
    assert other.revoked_by == "operator"

    # No longer live: nothing changes, and a script can tell (exit 1).
    again = await _bot("grants", "--revoke", grant.grant_id, "--database-url", sql_url)
    assert again.returncode == 1, again.stderr
    assert again.stdout.startswith(f"nothing to revoke: {grant.grant_id} was revoked by ops-dana")
    expired = await _bot("grants", "--revoke", "g_expired", "--json", "--database-url", sql_url)
    assert expired.returncode == 1, expired.stderr
    [untouched] = _lines(expired)
    assert (untouched["revoked"], untouched["state"]) == (False, "expired")
    assert untouched["revoked_by"] is None

    unknown = await _bot("grants", "--revoke", "g_nope", "--database-url", sql_url)
    assert _one_line_error(unknown) == "bot grants: no standing grant 'g_nope' in the database"
    by_alone = await _bot("grants", "--by", "ops-dana", "--database-url", sql_url)
    assert "--by goes with --revoke" in _one_line_error(by_alone)
    listed = await _bot("grants", "--json", "--database-url", sql_url)
    assert (listed.returncode, listed.stdout) == (0, "")
