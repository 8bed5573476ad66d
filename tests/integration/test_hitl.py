"""Human in the loop: parking, who may answer, and what a refused answer leaves behind
(nothing). Runs on every store; the cross-process park/resume runs on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent import (
    Agent,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeRequest,
    ResumeValidationError,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    SessionSuspendedError,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnInterruptedError,
    TurnStatus,
    grant_answer,
    tool,
)
from tests.support import children
from tests.support.engine_fixtures import RUN_LOG_ENV, read_runs
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event


def _runtime(store: SessionStore, agent: Agent, model: ScriptedModel | None = None) -> Runtime:
    return Runtime(
        store, model or refund_model(), agent=agent, recovery_interval=0.05, poll_interval=0.02
    )


async def _snapshot(store: SessionStore, key: str) -> tuple[Any, ...]:
    session = await store.get_session(key)
    turns = await store.list_turns(key)
    return (
        session.status if session else None,
        session.pending if session else None,
        [(t.turn_id, t.status) for t in turns],
        [await store.load_steps(key, t.turn_id) for t in turns],
        [(e.seq, e.type) for e in await store.read_events(key)],
        len(await store.load_transcript(key)),
    )


async def _parked(store: SessionStore, agent: Agent, key: str = "s1", **kw: Any) -> Any:
    rt = _runtime(store, agent)
    session = rt.session(agent, key)
    tid = await session.start(kw.pop("event", slack_event("refund order 42")), turn_id="T1")
    result = await session.result(tid)
    assert result.status == TurnStatus.SUSPENDED
    return rt, session, result


async def _child(url: str, run_log: Path, *args: str) -> list[str]:
    proc = await children.start(
        "tests.support.hitl_child", url, *args, env={RUN_LOG_ENV: str(run_log)}
    )
    return await children.finish(proc)


async def test_park_in_one_process_resume_in_another(
    sql_store: Any, sql_url: str, tmp_path: Path
) -> None:
    run_log = tmp_path / "runs.log"
    parked = await _child(sql_url, run_log, "start", "T1")
    assert parked[-1] == "RESULT suspended Asking for approval."
    session = await sql_store.get_session("hitl:s")
    assert session.status == "suspended"
    checkpoint = session.pending
    assert checkpoint["request"]["id"] == "approve-refund"
    assert checkpoint["call_id"] == "r1"
    assert checkpoint["opening_text"] == "refund order 42"
    assert checkpoint["policy"]["tools"] == ["issue_refund"]
    assert checkpoint["inbound"]["user"] == {"id": "U1", "attested": True, "name": None}
    assert "raw" not in checkpoint["inbound"], "the raw payload must stay out of checkpoints"
    assert [e.type for e in await sql_store.read_events("hitl:s")][-1] == "input.requested"

    resumed = await _child(sql_url, run_log, "resume", "T1", "U1")
    assert resumed[-1] == "RESULT completed Refund done."
    assert read_runs(run_log) == ["before", "before", "after"]
    transcript = await sql_store.load_transcript("hitl:s")
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
    assert transcript[2].result == {"refunded": True}
    steps = list(await sql_store.load_steps("hitl:s", "T1"))
    assert steps == [
        "model:1",
        "park:T1:approve-refund",
        "input:T1:approve-refund",
        "tool:1:r1",
        "model:3",
    ]


async def test_wrong_user_is_refused_and_nothing_changes(store: SessionStore) -> None:
    agent = refund_agent()
    rt, session, _ = await _parked(store, agent)
    try:
        before = await _snapshot(store, "s1")
        for by in ("U2", None):
            with pytest.raises(ResumeAuthorizationError):
                await session.resume("T1", "approve-refund", True, by=by)
        assert await _snapshot(store, "s1") == before
        await session.resume("T1", "approve-refund", True, by="U1")
        done = await session.result("T1")
        assert (done.status, done.text) == (TurnStatus.COMPLETED, "Refund done.")
    finally:
        await rt.close()


async def test_policy_answerer_needs_an_exact_grant(store: SessionStore) -> None:
    calls: list[dict[str, Any]] = []
    failing = {"on": True}

    async def authorize_answer(request: dict[str, Any]) -> bool:
        calls.append(request)
        if failing["on"]:
            raise ConnectionError("directory is down")
        return request["by"] == "U9" and request["principal"].get("team") == "T1"

    answerers = {"policy": "operator", "scope": "billing"}
    agent = refund_agent(answerers, authorize_answer=authorize_answer)
    rt, session, _ = await _parked(store, agent)
    try:
        before = await _snapshot(store, "s1")
        ask = ResumeRequest(
            turn_id="T1", input_id="approve-refund", by="U9", principal={"team": "T1"}
        )
        with pytest.raises(ConnectionError):
            await grant_answer(session, ask)  # the hook failing is a 500: nothing applied
        assert await _snapshot(store, "s1") == before
        with pytest.raises(ResumeAuthorizationError, match="the 'operator' policy allows"):
            await session.resume("T1", "approve-refund", True, by="U9")
        failing["on"] = False
        other = ResumeRequest(
            turn_id="T1", input_id="approve-refund", by="U8", principal={"team": "T1"}
        )
        assert await grant_answer(session, other) is None
        grant = await grant_answer(session, ask)
        assert grant is not None
        assert calls[-1] == {
            "policy": "operator",
            "scope": "billing",
            "by": "U9",
            "principal": {"team": "T1"},
        }
        wrong_scope = type(grant)(policy="operator", scope="support", by="U9", digest=grant.digest)
        with pytest.raises(ResumeAuthorizationError):
            await session.resume("T1", "approve-refund", True, by="U9", granted=wrong_scope)
        with pytest.raises(ResumeAuthorizationError):
            await session.resume("T1", "approve-refund", True, by="U8", granted=grant)
        assert await _snapshot(store, "s1") == before
        await session.resume("T1", "approve-refund", True, by="U9", granted=grant)
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
    finally:
        await rt.close()


async def test_grant_never_answers_a_user_request(store: SessionStore) -> None:
    from agent import Grant

    agent = refund_agent({"user": "U1"})
    rt, session, parked = await _parked(store, agent)
    try:
        grant = Grant(policy="operator", scope=None, by="U2", digest=parked.request.digest)
        with pytest.raises(ResumeAuthorizationError):
            await session.resume("T1", "approve-refund", True, by="U2", granted=grant)
    finally:
        await rt.close()


async def test_unattested_speaker_cannot_park_but_a_programmatic_turn_can(
    store: SessionStore,
) -> None:
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "s1")
        result = await session.turn(slack_event("refund", attested=False))
        assert result.status == TurnStatus.COMPLETED
        message = (await store.load_transcript("s1"))[2]
        assert isinstance(message, ToolMessage)
        assert message.is_error
        assert "not attested" in message.result["error"]
        assert "answerers" in message.result["error"]

        other = rt.session(agent, "s2")
        tid = await other.start("refund order 42")  # no inbound event: no restriction
        assert (await other.result(tid)).status == TurnStatus.SUSPENDED
        await other.resume(tid, "approve-refund", False, by=None)
        done = await other.result(tid)
        assert done.status == TurnStatus.COMPLETED
        assert (await store.load_transcript("s2"))[2].result == {"refunded": False}


async def test_local_tool_cannot_park(store: SessionStore) -> None:
    @tool
    def sync_ask(ctx: ToolContext) -> str:
        """Tries to park from a def tool."""
        coro = ctx.request_input(id="x", prompt="?")
        coro.send(None)  # run it: it raises before awaiting anything
        return "unreachable"

    agent = Agent(name="a", instructions="x", tools=[sync_ask])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c", name="sync_ask", input={})]),
            ScriptedReply(text="ok"),
        ]
    )
    async with _runtime(store, agent, model) as rt:
        await rt.session(agent, "s1").turn("go")
    message = (await store.load_transcript("s1"))[2]
    assert isinstance(message, ToolMessage)
    assert "only an async (remote) tool can park" in message.result["error"]


async def test_one_park_at_a_time_and_redelivery_of_the_parked_turn(store: SessionStore) -> None:
    agent = refund_agent()
    rt, session, _ = await _parked(store, agent)
    try:
        before = await _snapshot(store, "s1")
        with pytest.raises(SessionSuspendedError):
            await session.start(slack_event("something else"), turn_id="T2")
        assert await session.start(slack_event("refund order 42"), turn_id="T1") == "T1"
        await asyncio.sleep(0.1)
        assert await _snapshot(store, "s1") == before
        assert [r.id for r in await session.pending()] == ["approve-refund"]
    finally:
        await rt.close()


async def test_a_turn_that_parks_hands_back_the_turn_id_to_resume_with(
    store: SessionStore,
) -> None:
    agent = refund_agent()
    async with _runtime(store, agent) as rt:
        session = rt.session(agent, "s1")
        with pytest.raises(TurnInterruptedError) as parked:
            await session.turn(slack_event("refund order 42"))  # no turn id of the caller's
        result = parked.value.result
        assert result.status == TurnStatus.SUSPENDED
        assert result.request is not None
        assert result.turn_id == result.request.turn_id == (await session.pending())[0].turn_id
        await session.resume(result.turn_id, result.request.id, True, by="U1")
        done = await session.result(result.turn_id)
    assert (done.status, done.text) == (TurnStatus.COMPLETED, "Refund done.")


async def test_answers_are_turn_scoped(store: SessionStore) -> None:
    agent = refund_agent()
    rt, session, _ = await _parked(store, agent)
    try:
        await session.resume("T1", "approve-refund", True, by="U1")
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
        tid = await session.start(slack_event("another refund"), turn_id="T2")
        again = await session.result(tid)
        assert again.status == TurnStatus.SUSPENDED, "an old approval never carries over"
        assert again.request is not None
        assert again.request.turn_id == "T2"
    finally:
        await rt.close()


async def test_answer_failing_the_schema_is_refused_and_stays_parked(store: SessionStore) -> None:
    agent = refund_agent()
    rt, session, _ = await _parked(store, agent)
    try:
        before = await _snapshot(store, "s1")
        with pytest.raises(ResumeValidationError, match="does not fit"):
            await session.resume("T1", "approve-refund", "yes please", by="U1")
        assert await _snapshot(store, "s1") == before
        with pytest.raises(ResumeConflictError):
            await session.resume("T1", "other-input", True, by="U1")
        with pytest.raises(ResumeConflictError):
            await session.resume("T0", "approve-refund", True, by="U1")
        with pytest.raises(ResumeConflictError):
            await session.resume("T1", "approve-refund", True, by="U1", digest="stale")
        assert await _snapshot(store, "s1") == before
        assert await session.pending() != []
    finally:
        await rt.close()


async def test_racing_resumes_exactly_one_wins(store: SessionStore) -> None:
    agent = refund_agent()
    rt, session, _ = await _parked(store, agent)
    try:
        outcomes = await asyncio.gather(
            *(session.resume("T1", "approve-refund", True, by="U1") for _ in range(5)),
            return_exceptions=True,
        )
        assert outcomes.count(None) == 1
        assert all(isinstance(o, ResumeConflictError) for o in outcomes if o is not None)
        assert all(o.http_status == 409 for o in outcomes if isinstance(o, ResumeConflictError))
        assert (await session.result("T1")).status == TurnStatus.COMPLETED
        assert [m.role for m in await store.load_transcript("s1")].count("tool") == 1
    finally:
        await rt.close()
