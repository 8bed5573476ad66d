"""Who may answer: a turn nobody started in person names its answerers or cannot ask, and an
answer from another workspace (or org) is refused whatever the answerers say. On every store."""

from __future__ import annotations

from typing import Any

import pytest

from agent import (
    Agent,
    AssemblyError,
    InboundEvent,
    PolicyAnswerer,
    ResumeAuthorizationError,
    ResumeRequest,
    Runtime,
    Schedule,
    ScriptedModel,
    SessionStore,
    Speaker,
    ToolMessage,
    Trigger,
    TurnInput,
    TurnStatus,
    UserAnswerer,
    grant_answer,
    grant_confirmation,
)
from agent.seams import SessionStatus
from tests.integration.test_confirmations import _agent as confirm_agent
from tests.integration.test_confirmations import _model as confirm_model
from tests.support.hitl_fixtures import refund_agent, refund_model


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel | None = None) -> Runtime:
    return Runtime(
        store, model or refund_model(), agent=agent, recovery_interval=0.05, poll_interval=0.02
    )


def _cron(answerers: dict[str, Any] | None = None, team: str = "T1") -> TurnInput:
    return TurnInput(
        text="Check the refunds queue.",
        trigger=Trigger(
            kind="proactive", by="cron:daily", answerers=answerers, context={"team": team}
        ),
    )


def _spoken(user: str = "U1", **context: Any) -> InboundEvent:
    return InboundEvent(
        source="slack",
        text="refund order 42",
        user=Speaker(id=user, attested=True),
        context={"channel": "C1", **context},
    )


async def _tool_results(store: SessionStore, key: str) -> list[Any]:
    return [m.result for m in await store.load_transcript(key) if isinstance(m, ToolMessage)]


# proactive turns --------------------------------------------------------------------------------


async def test_a_proactive_turn_without_answerers_cannot_park(store: SessionStore) -> None:
    """Nobody spoke: "the speaker" does not exist and "anyone in the channel" is no answer."""
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "cron-1")
        result = await session.result(await session.start(_cron(), turn_id="cron:1"))
    assert result.status == TurnStatus.COMPLETED  # the model read why it could not ask
    [error] = await _tool_results(store, "cron-1")
    assert "not by a person" in error["error"]
    assert "cron:daily" in error["error"]
    record = await store.get_session("cron-1")
    assert record is not None
    assert record.status != SessionStatus.SUSPENDED
    assert record.pending is None


async def test_a_proactive_turn_asks_the_answerers_it_names(store: SessionStore) -> None:
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "cron-2")
        tid = await session.start(_cron({"user": "U9"}), turn_id="cron:2")
        parked = await session.result(tid)
        assert parked.status == TurnStatus.SUSPENDED
        assert parked.request.answerers == UserAnswerer(user="U9")
        with pytest.raises(ResumeAuthorizationError):
            await session.resume(tid, "approve-refund", True, by="U1", principal={"team": "T1"})
        with pytest.raises(ResumeAuthorizationError, match="another workspace"):
            await session.resume(tid, "approve-refund", True, by="U9", principal={"team": "T2"})
        await session.resume(
            tid, "approve-refund", True, by="U9", principal={"team": "T1", "user": "U9"}
        )
        assert (await session.result(tid)).status == TurnStatus.COMPLETED


async def test_receive_hands_its_answerers_to_the_turn(store: SessionStore) -> None:
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "p1")
        tid = await session.receive(
            "Any refunds to approve?",
            by="cron:x",
            answerers={"policy": "approvers", "scope": "refunds"},
            workspace={"team": "T1"},
            turn_id="p1:1",
        )
        parked = await session.result(tid)
    assert parked.status == TurnStatus.SUSPENDED
    assert parked.request is not None
    assert parked.request.answerers == PolicyAnswerer(policy="approvers", scope="refunds")
    [turn] = await store.list_turns("p1")
    assert turn.input.trigger is not None
    assert turn.input.trigger.context == {"team": "T1"}


async def test_a_turn_started_by_host_code_parks_without_restriction(store: SessionStore) -> None:
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "host-1")
        parked = await session.result(await session.start("refund order 42", turn_id="h1"))
        assert parked.status == TurnStatus.SUSPENDED
        assert parked.request.answerers is None


def test_a_schedule_with_malformed_answerers_does_not_assemble() -> None:
    with pytest.raises(AssemblyError, match="schedule 'daily'"):
        Agent(
            name="a",
            instructions="x",
            schedules=[
                Schedule(name="daily", cron="0 9 * * *", seed="s", channel="C1", answerers={})
            ],
        )


async def _parked_state(store: SessionStore) -> tuple[Any, ...]:
    record = await store.get_session("s1")
    assert record is not None
    steps = await store.load_steps("s1", "T1")
    return record.status, record.pending, sorted(steps)


# workspaces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("context", "principal"),
    [
        ({"team": "T1"}, {"team": "T2", "user": "U1"}),
        ({"team": "T1", "enterprise": "E1"}, {"team": "T1", "enterprise": "E2", "user": "U1"}),
        ({"team": "T1", "enterprise": "E1"}, {"team": "T1", "enterprise": None, "user": "U1"}),
        ({"team": "T1"}, {"user": "U1"}),
    ],
    ids=["other-team", "other-org", "no-org", "no-team"],
)
async def test_the_speakers_id_from_another_workspace_cannot_answer(
    store: SessionStore, context: dict[str, Any], principal: dict[str, Any]
) -> None:
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(_spoken(**context), turn_id="T1")
        assert (await session.result(tid)).status == TurnStatus.SUSPENDED
        before = await _parked_state(store)
        with pytest.raises(ResumeAuthorizationError, match="another"):
            await session.resume(tid, "approve-refund", True, by="U1", principal=principal)
        assert await _parked_state(store) == before
        home = {**context, "user": "U1"}
        await session.resume(tid, "approve-refund", True, by="U1", principal=home)
        assert (await session.result(tid)).status == TurnStatus.COMPLETED


async def test_a_policy_hook_is_never_asked_about_another_workspace(store: SessionStore) -> None:
    asked: list[dict[str, Any]] = []

    async def authorize_answer(request: dict[str, Any]) -> bool:
        asked.append(request)
        return True

    agent = refund_agent({"policy": "ops", "scope": None}, authorize_answer=authorize_answer)
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(_spoken(team="T1"), turn_id="T1")
        await session.result(tid)
        foreign = ResumeRequest(
            turn_id=tid, input_id="approve-refund", by="U7", principal={"team": "T2"}
        )
        with pytest.raises(ResumeAuthorizationError):
            await grant_answer(session, foreign)
        assert asked == []
        local = ResumeRequest(
            turn_id=tid, input_id="approve-refund", by="U7", principal={"team": "T1"}
        )
        grant = await grant_answer(session, local)
        assert grant is not None
        with pytest.raises(ResumeAuthorizationError):
            await session.resume(
                tid, "approve-refund", True, by="U7", principal={"team": "T2"}, granted=grant
            )
        await session.resume(
            tid, "approve-refund", True, by="U7", principal={"team": "T1"}, granted=grant
        )
        assert (await session.result(tid)).status == TurnStatus.COMPLETED


async def test_a_confirmation_from_another_workspace_runs_nothing(store: SessionStore) -> None:
    agent = confirm_agent()
    async with _runtime(store, agent, confirm_model()) as rt:
        session = rt.session(agent, "s1")
        tid = await session.start(_spoken(team="T1"), turn_id="T1")
        assert (await session.result(tid)).status == TurnStatus.COMPLETED
        [pending] = await store.list_confirmations("s1")
        with pytest.raises(ResumeAuthorizationError):
            await grant_confirmation(
                session, pending.confirmation_id, by="U1", principal={"team": "T2"}
            )
        with pytest.raises(ResumeAuthorizationError, match="another workspace"):
            await session.confirm(
                pending.confirmation_id, True, by="U1", principal={"team": "T2", "user": "U1"}
            )
        assert [t.turn_id for t in await store.list_turns("s1")] == ["T1"]
        follow_up = await session.confirm(
            pending.confirmation_id, True, by="U1", principal={"team": "T1", "user": "U1"}
        )
        assert (await session.result(follow_up)).status == TurnStatus.COMPLETED
        [turn] = [t for t in await store.list_turns("s1") if t.turn_id == follow_up]
        assert turn.input.trigger is not None
        assert turn.input.trigger.answerers == UserAnswerer(user="U1"), (
            "the confirmer answers what follows"
        )
        assert turn.input.trigger.context == {"team": "T1"}
