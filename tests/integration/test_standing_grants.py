"""Standing grants ("Approve, and allow this again"): an approval with `allow_again` lets the
tool's later calls by the same speaker, in the same thread (or channel) and workspace, run
without a new request until the grant expires or is revoked; the timeline records which grant
let each through. Refused and applying nothing: a tool that does not allow it, a span past its
limit, a denial, a quorum. Revocation is for the granter, the covered person, or an admin
(`authorize_answer`, policy "grants"), never from another workspace. On every store."""

from __future__ import annotations

from typing import Any

import pytest

from agent import (
    Agent,
    AllowAgain,
    AnswerRequest,
    ApprovedByPolicy,
    ConfirmationStatus,
    EffectAuthority,
    GrantNotFoundError,
    GrantScope,
    InboundEvent,
    Quorum,
    ResumeAuthorizationError,
    ResumeValidationError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    Speaker,
    ToolCall,
    ToolContext,
    TurnStatus,
    revoke_grant,
    standing_grants,
    tool,
)

DAY = 86_400.0
HELD: list[str] = []


@tool(effect="write", confirmation="required", grantable_for=DAY)
async def hold(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Put an order on hold (approved once, maybe allowed again)."""

    async def place(authority: EffectAuthority) -> dict[str, Any]:
        HELD.append(order)
        return {"held": order}

    effect = await ctx.run_effect(f"hold:{order}", place)
    return dict(effect.value)


@tool(effect="write", confirmation="required")
async def cancel(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Cancel an order (every call is asked)."""
    return {"cancelled": order}


@tool(
    effect="write",
    confirmation="required",
    grantable_for=DAY,
    answerers=Quorum(2, users=["UA", "UB"]),
)
async def wire(order: str, ctx: ToolContext) -> dict[str, Any]:
    """Wire money (two approvers)."""
    return {"wired": order}


async def admins_revoke(request: AnswerRequest) -> bool:
    return request["policy"] == "grants" and request["by"] == "UADMIN"


AGENT = Agent(
    name="ops", instructions="x", tools=[hold, cancel, wire], authorize_answer=admins_revoke
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _message(text: str, user: str = "U1", channel: str = "C1", team: str = "T1") -> InboundEvent:
    """A mention as the Slack surface passes it: `<tool> <order>`."""
    return InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id=user, attested=True),
        context={"team": team, "channel": channel},
    )


def _model() -> ScriptedModel:
    def respond(request: Any, step: int) -> ScriptedReply:
        last = request.messages[-1]
        if last.role == "user" and len(last.text.split()) == 2:
            name, order = last.text.split()
            return ScriptedReply(tool_calls=[ToolCall(id="w1", name=name, input={"order": order})])
        return ScriptedReply(text="ok")

    return ScriptedModel(responder=respond)


def _as(user: str, team: str = "T1") -> dict[str, Any]:
    return {"team": team, "user": user}


class Desk:
    """One runtime with a movable clock; `ask` runs a turn and returns its proposal, if any."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.clock = Clock()
        self.rt = Runtime(store, _model(), agent=AGENT, poll_interval=0.02, clock=self.clock)
        self.turns = 0

    async def ask(self, text: str, session: str = "s1", **who: Any) -> Any:
        self.turns += 1
        s = self.rt.session(AGENT, session)
        turn = await s.start(_message(text, **who), turn_id=f"T{self.turns}")
        assert (await s.result(turn)).status == TurnStatus.COMPLETED
        pending = await s.confirmations(ConfirmationStatus.PENDING)
        return pending[-1] if pending else None

    async def approve(self, proposal: Any, user: str = "U1", **allow: Any) -> None:
        s = self.rt.session(AGENT, proposal.session)
        again = AllowAgain(**allow) if allow else None
        follow_up = await s.confirm(
            proposal.confirmation_id, True, principal=_as(user), allow_again=again
        )
        assert (await s.result(follow_up)).status == TurnStatus.COMPLETED


@pytest.fixture
async def desk(store: SessionStore) -> Any:
    HELD.clear()
    d = Desk(store)
    try:
        yield d
    finally:
        await d.rt.close()


async def test_a_thread_grant_lets_the_same_persons_next_call_run_unasked(desk: Desk) -> None:
    first = await desk.ask("hold 41")
    await desk.approve(first, scope="thread", seconds=3600)
    assert await desk.ask("hold 42") is None, "the grant covered it: nobody was asked"
    assert HELD == ["41", "42"]
    [grant] = await standing_grants(desk.store, _as("U1"), now=desk.clock())
    assert (grant.tool, grant.scope, grant.speaker, grant.granted_by) == (
        "hold",
        GrantScope.THREAD,
        "U1",
        "U1",
    )
    assert grant.expires_at == desk.clock() + 3600
    records = await desk.rt.session(AGENT, "s1").confirmations()
    assert [(r.status, r.by) for r in records] == [
        (ConfirmationStatus.ACCEPTED, "U1"),
        (ConfirmationStatus.ACCEPTED, f"grant:{grant.grant_id}"),
    ]
    [shown] = [e for e in await desk.store.read_events("s1") if isinstance(e, ApprovedByPolicy)]
    assert (shown.granted_by, shown.grant_id) == ("U1", grant.grant_id)


async def test_a_grant_covers_only_its_person_scope_tool_and_workspace(desk: Desk) -> None:
    await desk.approve(await desk.ask("hold 41"), scope="thread", seconds=3600)
    assert await desk.ask("hold 42", user="U2") is not None, "another person is asked"
    assert await desk.ask("hold 43", session="s2") is not None, "another thread is asked"
    assert await desk.ask("cancel 41") is not None, "another tool is asked"
    assert await desk.ask("hold 44", session="s3", team="T9") is not None  # another workspace


async def test_a_channel_grant_covers_another_thread_of_the_channel_only(desk: Desk) -> None:
    await desk.approve(await desk.ask("hold 41"), scope="channel", seconds=3600)
    assert await desk.ask("hold 42", session="s2") is None
    assert await desk.ask("hold 43", session="s3", channel="C2") is not None
    assert HELD == ["41", "42"]


async def test_an_expired_or_revoked_grant_covers_nothing(desk: Desk) -> None:
    await desk.approve(await desk.ask("hold 41"), scope="thread", seconds=3600)
    desk.clock.now += 3600
    assert await desk.ask("hold 42") is not None, "expired: asked again"
    await desk.approve(await desk.ask("hold 43"), scope="thread", seconds=3600)
    [grant] = await standing_grants(desk.store, _as("U1"), now=desk.clock())
    with pytest.raises(ResumeAuthorizationError):
        await _revoke(desk, grant.grant_id, "U7")
    with pytest.raises(GrantNotFoundError):
        await _revoke(desk, grant.grant_id, "U1", team="T9")
    revoked = await _revoke(desk, grant.grant_id, "UADMIN")  # the agent's rule admits admins
    assert revoked.revoked_by == "UADMIN"
    assert await standing_grants(desk.store, _as("U1"), now=desk.clock()) == []
    assert await desk.ask("hold 44") is not None, "revoked: asked again"


async def _revoke(desk: Desk, grant_id: str, user: str, team: str = "T1") -> Any:
    return await revoke_grant(
        desk.store,
        grant_id,
        by=user,
        principal=_as(user, team),
        authorize_answer=admins_revoke,
        now=desk.clock(),
    )


@pytest.mark.parametrize(
    ("text", "allow", "accepted"),
    [
        ("cancel 41", {"scope": "thread", "seconds": 60}, True),  # not allowed for the tool
        ("hold 41", {"scope": "thread", "seconds": DAY + 1}, True),  # past its limit
        ("hold 41", {"scope": "thread", "seconds": 60}, False),  # a denial allows nothing
    ],
)
async def test_a_grant_that_cannot_be_given_is_refused_and_applies_nothing(
    desk: Desk, text: str, allow: dict[str, Any], accepted: bool
) -> None:
    proposal = await desk.ask(text)
    session = desk.rt.session(AGENT, "s1")
    with pytest.raises(ResumeValidationError):
        await session.confirm(
            proposal.confirmation_id,
            accepted,
            principal=_as("U1"),
            allow_again=AllowAgain(**allow),
        )
    [still] = await session.confirmations()
    assert still.status == ConfirmationStatus.PENDING
    assert await standing_grants(desk.store, None, now=desk.clock()) == []


async def test_one_voter_of_a_quorum_cannot_allow_it_again(desk: Desk) -> None:
    proposal = await desk.ask("wire 41")
    events = await desk.store.read_events("s1")
    [asked] = [e for e in events if e.type == "confirmation.requested"]
    assert asked.confirmation.grantable_for is None  # type: ignore[union-attr]
    with pytest.raises(ResumeValidationError):
        await desk.rt.session(AGENT, "s1").confirm(
            proposal.confirmation_id,
            True,
            principal=_as("UA"),
            allow_again=AllowAgain(scope=GrantScope.THREAD, seconds=60),
        )
