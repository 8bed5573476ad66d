"""Approve, and allow this again, over HTTP: a confirmation's `allow_again` issues a standing
grant with the approval (the reply names it, `GET /grants` lists it), and the same speaker's
next call of that tool in that session runs with no request, recorded as approved by the grant.
A grant the engine will not issue (too long, a channel the conversation lacks, with a denial)
is a 422 with the engine's reason and nothing applied: the proposal still waits. Only the
granter, the person covered, or whom the grants policy admits revoke it (403 for anyone else),
another workspace sees no grant and reaches none (404), and once revoked the next call is asked
again. On SQLite and PostgreSQL, in both serving modes."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent import (
    GRANTS_POLICY,
    Agent,
    AnswerRequest,
    ConfirmationStatus,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    tool,
)
from tests.api.conftest import ALICE, BOSS, TEAM
from tests.bot.harness import eventually

pytestmark = pytest.mark.usefixtures("serving")
DAY = 86_400
KEY = f"api:{TEAM}:holds"
HELD: list[str] = []
"""Every order put on hold (the grantable write's effect)."""


@tool(effect="write", confirmation="required", grantable_for=DAY)
async def place_hold(order_id: str, ctx: ToolContext) -> dict[str, Any]:
    """Put an order on hold (approved once; maybe allowed again for up to a day)."""
    HELD.append(order_id)
    return {"held": order_id}


async def admins(request: AnswerRequest) -> bool:
    """The boss may revoke anyone's grant in this workspace; nobody is admitted otherwise."""
    principal = request["principal"]
    return (
        request["policy"] == GRANTS_POLICY
        and principal.get("team") == TEAM
        and principal.get("user") == BOSS
    )


AGENT = Agent(
    name="api-grants", instructions="Hold orders.", tools=[place_hold], authorize_answer=admins
)


def respond(request: Any, step: int) -> ScriptedReply:
    """ "hold order 7" proposes place_hold for order 7; anything else closes the turn."""
    last = request.messages[-1]
    found = re.search(r"\bhold order (\d+)\s*$", getattr(last, "text", ""))
    if last.role == "user" and found:
        order = found.group(1)
        call = ToolCall(id=f"c_hold_{order}", name="place_hold", input={"order_id": order})
        return ScriptedReply(text="On it.", tool_calls=[call])
    return ScriptedReply(text="Done.")


@pytest.fixture(autouse=True)
def _no_holds() -> None:
    HELD.clear()


async def _hold(alice, order: str) -> dict[str, Any] | None:
    """Ask for a hold; the proposal it left waiting, or None when it ran at once."""
    turn = await alice.post(
        "/sessions/holds/turns", json={"text": f"hold order {order}", "turn_id": f"t{order}"}
    )
    assert turn.status_code == 200, turn.text
    assert turn.json()["status"] == "completed"
    waiting = (await alice.get("/sessions/holds/pending")).json()["confirmations"]
    assert len(waiting) <= 1
    return waiting[0] if waiting else None


async def _acted_on(alice, turn_id: str) -> None:
    async def completed() -> bool:
        turn = await alice.get(f"/sessions/holds/turns/{turn_id}")
        return bool(turn.json()["status"] == "completed")

    await eventually(completed, within=30)


async def test_a_grant_lets_the_next_call_run_until_the_granter_revokes_it(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(responder=respond))
    alice, bob, eve = clients(bot, "alice"), clients(bot, "bob"), clients(bot, "eve")
    proposal = await _hold(alice, "1")
    assert proposal is not None
    path = f"/sessions/holds/confirmations/{proposal['confirmation_id']}"

    too_long = await alice.post(
        path, json={"accepted": True, "allow_again": {"scope": "thread", "seconds": 2 * DAY}}
    )
    assert too_long.status_code == 422
    assert "at most 1 day" in too_long.json()["error"]
    no_channel = await alice.post(
        path, json={"accepted": True, "allow_again": {"scope": "channel", "seconds": 60}}
    )
    assert no_channel.status_code == 422
    assert "no channel" in no_channel.json()["error"]
    with_denial = await alice.post(
        path, json={"accepted": False, "allow_again": {"scope": "thread", "seconds": 60}}
    )
    assert with_denial.status_code == 422
    for malformed in (
        {"scope": "forever", "seconds": 60},
        {"scope": "thread", "seconds": 0},
        {"scope": "thread", "seconds": "60"},
        {"scope": "thread"},
        {"scope": "thread", "seconds": 60, "speaker": "U0BOB"},
    ):
        refused = await alice.post(path, json={"accepted": True, "allow_again": malformed})
        assert refused.status_code == 422, malformed
        assert refused.json()["detail"][0]["loc"][0] == "allow_again"
    # Nothing was applied: the proposal still waits, nothing ran, no grant.
    [still] = (await alice.get("/sessions/holds/pending")).json()["confirmations"]
    assert still["confirmation_id"] == proposal["confirmation_id"]
    assert HELD == []
    assert (await alice.get("/grants")).json() == {"grants": []}

    confirmed = await alice.post(
        path, json={"accepted": True, "allow_again": {"scope": "thread", "seconds": 3600}}
    )
    assert confirmed.status_code == 202, confirmed.text
    grant = confirmed.json()["grant"]
    await _acted_on(alice, confirmed.json()["turn_id"])
    assert HELD == ["1"]
    listed = (await alice.get("/grants")).json()["grants"]
    assert listed == [grant]
    assert {k: grant[k] for k in ("tool", "team", "enterprise", "scope", "session")} == {
        "tool": "place_hold",
        "team": TEAM,
        "enterprise": None,
        "scope": "thread",
        "session": KEY,
    }
    assert (grant["speaker"], grant["granted_by"], grant["channel"]) == (ALICE, ALICE, None)
    assert grant["confirmation_id"] == proposal["confirmation_id"]
    assert grant["expires_at"] - grant["created_at"] == pytest.approx(3600)
    assert (grant["revoked_at"], grant["revoked_by"]) == (None, None)
    assert (await bob.get("/grants")).json()["grants"] == [grant]  # the workspace's grants
    assert (await eve.get("/grants")).json() == {"grants": []}  # another workspace's: none

    # The same speaker's next call in this thread runs with no request, approved by the grant.
    assert await _hold(alice, "2") is None
    assert HELD == ["1", "2"]
    ran = [c for c in await bot.session(KEY).confirmations() if c.turn_id == "t2"]
    assert [(c.status, c.by) for c in ran] == [
        (ConfirmationStatus.ACCEPTED, f"grant:{grant['grant_id']}")
    ]

    revoke = f"/grants/{grant['grant_id']}"
    assert (await eve.delete(revoke)).status_code == 404
    assert (await alice.delete("/grants/g_nosuchgrant")).status_code == 404
    stranger = await bob.delete(revoke)
    assert stranger.status_code == 403
    assert "revoke" in stranger.json()["error"]
    assert (await alice.get("/grants")).json()["grants"] == [grant]
    revoked = await alice.delete(revoke)
    assert revoked.status_code == 200
    assert revoked.json()["revoked_by"] == ALICE
    assert revoked.json()["revoked_at"] is not None
    assert (await alice.get("/grants")).json() == {"grants": []}
    again = await alice.delete(revoke)  # the first revocation stands
    assert (again.status_code, again.json()) == (200, revoked.json())

    # Revoked: the next call is asked again.
    asked = await _hold(alice, "3")
    assert asked is not None
    assert asked["tool"] == "place_hold"
    assert HELD == ["1", "2"]


async def test_whom_the_grants_policy_admits_revokes_another_persons_grant(
    db_url, api, clients
) -> None:
    bot = await api(db_url, AGENT, ScriptedModel(responder=respond))
    alice, boss = clients(bot, "alice"), clients(bot, "boss")
    proposal = await _hold(alice, "1")
    assert proposal is not None
    confirmed = await alice.post(
        f"/sessions/holds/confirmations/{proposal['confirmation_id']}",
        json={"accepted": True, "allow_again": {"scope": "thread", "seconds": DAY}},
    )
    assert confirmed.status_code == 202, confirmed.text
    grant_id = confirmed.json()["grant"]["grant_id"]
    await _acted_on(alice, confirmed.json()["turn_id"])

    revoked = await boss.delete(f"/grants/{grant_id}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_by"] == BOSS
    assert await _hold(alice, "2") is not None
    assert HELD == ["1"]
