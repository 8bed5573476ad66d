"""The operator's command line, run as an operator runs it (a subprocess of `bot.cli.main`) against
SQLite and PostgreSQL: `bot approvals`, `bot turns [--stuck]`, `bot cancel`, `bot reset`, each
in text and `--json` (JSON lines), and their one-line errors.

`bot cancel` and `bot reset` act on turns a worker in a third process runs
(`tests.support.operator_child`): the command's durable request is what that worker obeys.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent import (
    Agent,
    AnswerRequest,
    InboundEvent,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    Speaker,
    ToolCall,
    ToolContext,
    TurnInput,
    TurnStatus,
    tool,
)
from agent.seams import SessionStatus, StepCommit
from storage import SqlStore
from storage.delivery.store import DeliveryStore, Post, PostUpdate
from tests.support import children

S1 = "slack:T1:C1:1700000000.000100"
S2 = "slack:T1:C2:1700000001.000200"


async def _bot(*args: str) -> children.Ran:
    return await children.run("bot.cli.main", *args)


def _lines(done: children.Ran) -> list[dict[str, Any]]:
    return [json.loads(line) for line in done.stdout.splitlines()]


def _one_line_error(done: children.Ran, code: int, command: str) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"bot {command}: "), lines[0]
    return lines[0]


def _said(text: str, user: str = "U1", channel: str = "C1") -> InboundEvent:
    return InboundEvent(
        source="slack",
        text=text,
        user=Speaker(id=user, attested=True),
        context={"team": "T1", "channel": channel},
    )


@pytest.fixture
async def delivery(sql_store: SqlStore, sql_url: str) -> AsyncIterator[DeliveryStore]:
    store = await DeliveryStore.open(sql_url, store=sql_store)
    try:
        yield store
    finally:
        await store.close()


async def _thread(delivery: DeliveryStore, key: str) -> None:
    _, team, channel, thread_ts = key.split(":")
    await delivery.register(
        key, team=team, channel=channel, thread_ts=thread_ts, user_id="U1", now=time.time()
    )


# -- bot approvals ---------------------------------------------------------------------------


@tool
async def approve(ctx: ToolContext) -> str:
    """Asks U1."""
    return str(await ctx.request_input(id="go", prompt="Ship   the\nrelease?"))


@tool(
    effect="write",
    confirmation="required",
    answerers={"policy": "refund-approvers", "scope": "refunds"},
)
async def refund(order: str) -> dict[str, str]:
    """Refund an order (the refund approvers confirm)."""
    return {"refunded": order}


async def _nobody(request: AnswerRequest) -> bool:
    return False


def _calling(name: str, **arguments: Any) -> list[ScriptedReply]:
    call = ToolCall(id=f"c-{name}", name=name, input=arguments)
    return [ScriptedReply(tool_calls=[call]), ScriptedReply(text=f"{name} proposed")]


async def _two_requests(store: SqlStore) -> None:
    agent = Agent(name="a", instructions="x", tools=[approve, refund], authorize_answer=_nobody)
    model = ScriptedModel(
        by_opening={"approve": _calling("approve"), "refund": _calling("refund", order="o-7")}
    )
    async with Runtime(store, model, agent=agent, poll_interval=0.02) as rt:
        parked = rt.session(agent, S1)
        assert (
            await parked.result(await parked.start(_said("approve"), turn_id="t-park"))
        ).status == TurnStatus.SUSPENDED
        proposing = rt.session(agent, S2)
        await proposing.result(
            await proposing.start(_said("refund", channel="C2"), turn_id="t-refund")
        )


async def test_approvals_lists_every_pending_request_with_age_answerers_and_link(
    sql_store: SqlStore, sql_url: str, delivery: DeliveryStore
) -> None:
    await _two_requests(sql_store)
    await _thread(delivery, S1)  # S2 has no delivery row: its link comes from its key
    [confirmation] = await sql_store.list_confirmations(S2)
    posted = await delivery.begin_post(
        Post(
            post_key=f"approval|{S1}|t-park|input|go",
            session_key=S1,
            turn_id="t-park",
            kind="approval",
            channel="C1",
            thread_ts="1700000000.000100",
        ),
        time.time(),
    )
    await delivery.update_post(
        PostUpdate(post_key=posted.post_key, ts="1700000000.000300", state="closed"), time.time()
    )

    listed = await _bot("approvals", "--database-url", sql_url)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == [
        "AGE", "KIND", "SESSION", "TURN", "REQUEST", "ANSWERERS", "EXPIRES", "PROMPT", "LINK"
    ]  # fmt: skip
    assert len(rows) == 2
    by_session = {row.split()[2]: row for row in rows}
    assert "user U1" in by_session[S1]
    assert "Ship the release?" in by_session[S1]
    assert "https://slack.com/app_redirect?team=T1&channel=C1" in by_session[S1]
    assert "policy refund-approvers (refunds)" in by_session[S2]
    assert "https://slack.com/app_redirect?team=T1&channel=C2" in by_session[S2]

    as_json = await _bot("approvals", "--json", "--database-url", sql_url)
    assert as_json.returncode == 0, as_json.stderr
    records = {r["session"]: r for r in _lines(as_json)}
    park, proposal = records[S1], records[S2]
    assert (park["kind"], park["turn_id"], park["request_id"], park["tool"]) == (
        "input", "t-park", "go", "approve"
    )  # fmt: skip
    assert park["answerers"] == {"user": "U1"}
    assert park["escalated_to"] == []
    assert park["asked_by"] == "U1"
    assert park["workspace"] == {"team": "T1"}
    assert 0 <= park["age_seconds"] < 600
    assert park["asked_at"].endswith("+00:00")
    assert park["expires_at"] is None
    assert park["slack"] == {
        "team": "T1",
        "channel": "C1",
        "thread_ts": "1700000000.000100",
        "message_ts": "1700000000.000300",
    }
    assert (proposal["kind"], proposal["request_id"]) == ("confirm", confirmation.confirmation_id)
    assert proposal["answerers"] == {"policy": "refund-approvers", "scope": "refunds"}
    assert proposal["slack"]["message_ts"] is None

    linked = await _bot(
        "approvals", "--session", S1, "--slack-domain", "https://acme.slack.com/", "--json",
        "--database-url", sql_url,
    )  # fmt: skip
    [only] = _lines(linked)
    assert only["link"] == (
        "https://acme.slack.com/archives/C1/p1700000000000300?thread_ts=1700000000.000100&cid=C1"
    )
    thread_only = await _bot(
        "approvals", "--session", S2, "--slack-domain", "acme", "--json", "--database-url", sql_url
    )
    assert _lines(thread_only)[0]["link"] == "https://acme.slack.com/archives/C2/p1700000001000200"

    old = await _bot("approvals", "--older-than", "2h", "--database-url", sql_url)
    assert (old.returncode, old.stdout.strip()) == (0, "no pending approvals")
    old_json = await _bot("approvals", "--older-than", "2h", "--json", "--database-url", sql_url)
    assert (old_json.returncode, old_json.stdout) == (0, "")


async def test_approvals_says_whom_a_request_was_escalated_to(
    sql_store: SqlStore, sql_url: str
) -> None:
    @tool(effect="write", confirmation="required", escalate_after=(60, ["UBOSS", "UCTO"]))
    async def wire(to: str) -> dict[str, str]:
        """Wire money."""
        return {"wired": to}

    now = [time.time()]
    agent = Agent(name="a", instructions="x", tools=[wire])
    model = ScriptedModel(by_opening={"wire": _calling("wire", to="bob")})
    rt = Runtime(sql_store, model, agent=agent, clock=lambda: now[0], poll_interval=0.02)
    async with rt:
        session = rt.session(agent, S1)
        await session.result(await session.start(_said("wire"), turn_id="t-wire"))
        before = await _bot("approvals", "--json", "--database-url", sql_url)
        assert [r["escalated_to"] for r in _lines(before)] == [[]]
        now[0] += 61
        await rt.expire_due()

    listed = await _bot("approvals", "--database-url", sql_url)
    assert listed.returncode == 0, listed.stderr
    assert "user U1; escalated to any of UBOSS,UCTO" in listed.stdout
    as_json = await _bot("approvals", "--json", "--database-url", sql_url)
    [record] = _lines(as_json)
    assert record["escalated_to"] == [{"quorum": 1, "users": ["UBOSS", "UCTO"]}]


async def test_approvals_refuses_what_it_cannot_read_in_one_line(sql_url: str) -> None:
    unknown = await _bot("approvals", "--session", "slack:T9:C9:1.2", "--database-url", sql_url)
    line = _one_line_error(unknown, 2, "approvals")
    assert line == "bot approvals: no session 'slack:T9:C9:1.2' in the database"
    bad_age = await _bot("approvals", "--older-than", "soon", "--database-url", sql_url)
    assert bad_age.returncode == 2
    assert "'soon' is not an age like 30s, 90m, 24h or 7d" in bad_age.stderr
    assert "Traceback" not in bad_age.stderr


# -- bot turns -------------------------------------------------------------------------------


async def _fail(store: SqlStore, key: str, turn_id: str, error: str) -> None:
    await store.enqueue_turn(key, turn_id, TurnInput(text=f"please {turn_id}"))
    lease = await store.acquire_lease(key, "w-ok", 30, time.time())
    assert lease is not None
    result = {"status": "failed", "error": error}
    commit = StepCommit(turn_id=turn_id, turn_status=TurnStatus.FAILED, turn_result=result)
    await store.commit(lease, commit, 30, time.time())
    await store.release_lease(lease)


async def _stuck_states(store: SqlStore) -> None:
    """A turn whose worker died (its lease ran out 100 s ago), two turns queued with nobody to
    run them, a conversation whose last two turns failed, and one parked (not stuck)."""
    dead = "slack:T1:C1:1.000001"
    await store.enqueue_turn(dead, "d1", TurnInput(text="work"))
    then = time.time() - 130
    lease = await store.acquire_lease(dead, "worker-dead", 30, then)
    assert lease is not None
    running = StepCommit(
        turn_id="d1", turn_status=TurnStatus.RUNNING, session_status=SessionStatus.RUNNING
    )
    await store.commit(lease, running, 30, then)
    await store.enqueue_turn("slack:T1:C1:2.000002", "q1", TurnInput(text="first"))
    await store.enqueue_turn("slack:T1:C1:2.000002", "q2", TurnInput(text="second"))
    failing = "slack:T1:C1:3.000003"
    await _fail(store, failing, "f1", "ModelError: overloaded")
    await _fail(store, failing, "f2", "ModelError: context too long")


async def test_turns_stuck_names_each_turn_and_why(sql_store: SqlStore, sql_url: str) -> None:
    await _stuck_states(sql_store)

    asked = time.time()
    stuck = await _bot("turns", "--stuck", "--json", "--database-url", sql_url)
    took = time.time() - asked
    assert stuck.returncode == 1, stuck.stderr  # something is stuck
    found = {(r["session"], r["turn_id"]): r for r in _lines(stuck)}
    assert set(found) == {("slack:T1:C1:1.000001", "d1"), ("slack:T1:C1:3.000003", "f2")}
    dead = found["slack:T1:C1:1.000001", "d1"]
    assert [r["code"] for r in dead["reasons"]] == ["lease_expired"]
    # Its lease ran out 100 s before the command started; a busy machine may take a while.
    ago = re.fullmatch(
        r"the lease of worker-dead expired (\d+)m ago and no worker has taken the session up "
        r"since",
        dead["reasons"][0]["detail"],
    )
    assert ago is not None, dead["reasons"][0]["detail"]
    assert 1 <= int(ago.group(1)) <= (100 + took + 1) // 60
    assert dead["lease"]["owner"] == "worker-dead"
    assert dead["status"] == "running"
    failing = found["slack:T1:C1:3.000003", "f2"]
    assert failing["failures"] == 2
    assert failing["error"] == "ModelError: context too long"
    assert failing["reasons"] == [
        {
            "code": "failing",
            "detail": "2 failed turns in a row; the latest: ModelError: context too long",
        }
    ]

    queued = await _bot(
        "turns", "--stuck", "--queued-for", "0s", "--failures", "3", "--json",
        "--database-url", sql_url,
    )  # fmt: skip
    found = {r["turn_id"]: r for r in _lines(queued)}
    assert set(found) == {"d1", "q1", "q2"}  # two failures are not three
    assert found["q1"]["reasons"][0]["code"] == "queued"
    assert found["q1"]["reasons"][0]["detail"].endswith(", not started")
    assert found["q2"]["reasons"][0]["detail"].endswith(", behind turn q1 (queued)")
    assert found["q2"]["waiting_seconds"] >= 0

    table = await _bot("turns", "--stuck", "--database-url", sql_url)
    assert table.returncode == 1
    header, *rows = table.stdout.splitlines()
    assert header.split() == ["SESSION", "TURN", "STATUS", "REASON", "DETAIL"]
    assert [row.split()[:4] for row in rows] == [
        ["slack:T1:C1:1.000001", "d1", "running", "lease_expired"],
        ["slack:T1:C1:3.000003", "f2", "failed", "failing"],
    ]

    calm = await _bot(
        "turns", "--stuck", "--session", "slack:T1:C1:2.000002", "--database-url", sql_url
    )
    assert (calm.returncode, calm.stdout.strip()) == (0, "nothing stuck")


async def test_turns_lists_a_session_or_every_open_turn(sql_store: SqlStore, sql_url: str) -> None:
    await _stuck_states(sql_store)

    one = await _bot(
        "turns", "--session", "slack:T1:C1:3.000003", "--json", "--database-url", sql_url
    )
    assert one.returncode == 0, one.stderr
    records = _lines(one)
    assert [(r["turn_id"], r["status"], r["error"]) for r in records] == [
        ("f1", "failed", "ModelError: overloaded"),
        ("f2", "failed", "ModelError: context too long"),
    ]
    assert records[0]["text"] == "please f1"
    assert records[0]["queued_at"].endswith("+00:00")

    text = await _bot("turns", "--session", "slack:T1:C1:3.000003", "--database-url", sql_url)
    header, *rows = text.stdout.splitlines()
    assert header.split() == ["SESSION", "TURN", "KIND", "STATUS", "AGE", "DETAIL", "TEXT"]
    assert "ModelError: overloaded" in rows[0]
    assert rows[0].rstrip().endswith("please f1")

    every = await _bot("turns", "--json", "--database-url", sql_url)
    assert [(r["turn_id"], r["status"]) for r in _lines(every)] == [
        ("d1", "running"),
        ("q1", "queued"),
        ("q2", "queued"),
    ]


async def test_turns_refuses_bad_input_in_one_line(sql_url: str) -> None:
    unknown = await _bot("turns", "--session", "nope", "--database-url", sql_url)
    assert _one_line_error(unknown, 2, "turns") == "bot turns: no session 'nope' in the database"
    bad = await _bot("turns", "--stuck", "--failures", "0", "--database-url", sql_url)
    assert bad.returncode == 2
    assert "'0' is not a whole number of at least 1" in bad.stderr
    assert "Traceback" not in bad.stderr


# -- bot cancel and bot reset, obeyed by a worker in another process -------------------------


@pytest.fixture
async def worker(sql_url: str) -> AsyncIterator[children.Process]:
    proc = await children.start("tests.support.operator_child", sql_url)
    try:
        await children.wait_line(proc, "READY", within=60)
        yield proc
    finally:
        await children.kill(proc)


async def _until(store: SqlStore, key: str, turn_id: str, *statuses: TurnStatus) -> None:
    async with asyncio.timeout(60):
        while True:
            turn = await store.get_turn(key, turn_id)
            if turn is not None and turn.status in statuses:
                return
            await asyncio.sleep(0.05)


async def test_cancel_stops_a_turn_a_worker_in_another_process_is_running(
    sql_store: SqlStore, sql_url: str, delivery: DeliveryStore, worker: children.Process
) -> None:
    await _thread(delivery, S1)
    await sql_store.enqueue_turn(S1, "t-slow", TurnInput.of(_said("slow")))
    await children.wait_line(worker, "SLOW t-slow", within=60)
    before = await delivery.get_target(S1)
    assert before is not None

    done = await _bot(
        "cancel", S1, "--turn", "t-slow", "--wait", "60", "--json", "--database-url", sql_url
    )

    assert done.returncode == 0, done.stderr
    assert _lines(done) == [
        {
            "action": "cancel",
            "session": S1,
            "reason": "stopped",
            "by": "operator",  # naming nobody, the thread says an operator stopped it
            "turns": [{"turn_id": "t-slow", "status": "cancelled"}],
            "thread_woken": True,
        }
    ]
    turn = await sql_store.get_turn(S1, "t-slow")
    assert turn is not None
    assert (turn.status, turn.cancel_reason) == (TurnStatus.CANCELLED, "stopped")
    texts = [getattr(m, "text", "") for m in await sql_store.load_transcript(S1)]
    assert "MODEL CALLED AFTER THE SLOW TOOL" not in texts  # stopped before the next call
    events = [e for e in await sql_store.read_events(S1) if e.type == "turn.cancelled"]
    assert [(e.turn_id, e.reason) for e in events] == [("t-slow", "stopped")]
    after = await delivery.get_target(S1)
    assert after is not None
    assert after.active
    assert after.activity > before.activity

    again = await _bot("cancel", S1, "--turn", "t-slow", "--database-url", sql_url)
    assert again.returncode == 1
    assert again.stdout.strip() == "nothing to cancel: turn 't-slow' has already ended"
    unknown_turn = await _bot("cancel", S1, "--turn", "t-nope", "--database-url", sql_url)
    line = _one_line_error(unknown_turn, 2, "cancel")
    assert line == f"bot cancel: no turn 't-nope' in session '{S1}'"
    unknown = await _bot("cancel", "slack:T1:C1:bad", "--database-url", sql_url)
    line = _one_line_error(unknown, 2, "cancel")
    assert line == "bot cancel: no session 'slack:T1:C1:bad' in the database"
    bad_by = await _bot("cancel", S1, "--by", "alice", "--database-url", sql_url)
    assert bad_by.returncode == 2
    assert "'alice' is not a Slack user id" in bad_by.stderr


async def test_cancel_of_a_session_ends_its_parked_turn_as_slacks_stop_does(
    sql_store: SqlStore, sql_url: str, delivery: DeliveryStore, worker: children.Process
) -> None:
    await _thread(delivery, S1)
    await sql_store.enqueue_turn(S1, "t-ask", TurnInput.of(_said("ask")))
    await _until(sql_store, S1, "t-ask", TurnStatus.SUSPENDED)

    done = await _bot("cancel", S1, "--by", "U0BOB", "--database-url", sql_url)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "t-ask: asked to stop (stopped); its worker stops it at the next checkpoint"
    )
    await _until(sql_store, S1, "t-ask", TurnStatus.CANCELLED)  # ended by the worker
    turn = await sql_store.get_turn(S1, "t-ask")
    assert turn is not None
    assert (turn.cancel_reason, turn.cancelled_by) == ("stopped", "U0BOB")
    events = await sql_store.read_events(S1)
    resolved = [e for e in events if e.type == "input.resolved"]
    assert [(e.outcome, e.by) for e in resolved] == [("cancelled", "U0BOB")]
    cancelled = [e for e in events if e.type == "turn.cancelled"]
    assert [(e.reason, e.by) for e in cancelled] == [("stopped", "U0BOB")]
    listed = await _bot("approvals", "--json", "--database-url", sql_url)
    assert (listed.returncode, listed.stdout) == (0, "")


async def test_reset_is_applied_by_the_worker_running_the_session(
    sql_store: SqlStore, sql_url: str, delivery: DeliveryStore, worker: children.Process
) -> None:
    await _thread(delivery, S1)
    await sql_store.enqueue_turn(S1, "t-hello", TurnInput.of(_said("hello")))
    await _until(sql_store, S1, "t-hello", TurnStatus.COMPLETED)
    await sql_store.enqueue_turn(S1, "t-slow", TurnInput.of(_said("slow")))
    await children.wait_line(worker, "SLOW t-slow", within=60)

    done = await _bot("reset", S1, "--json", "--database-url", sql_url)

    assert done.returncode == 0, done.stderr
    [record] = _lines(done)
    assert record["status"] == "completed"
    assert record["archived_as"] == f"{S1}#g0"
    assert record["generation"] == 1
    assert record["archived_messages"] >= 3  # hello's two, and slow's opening and call
    turn = await sql_store.get_turn(S1, "t-slow")
    assert turn is not None
    assert (turn.status, turn.cancel_reason) == (TurnStatus.CANCELLED, "reset")
    assert await sql_store.load_transcript(S1) == []
    session = await sql_store.get_session(S1)
    assert session is not None
    assert session.generation == 1

    text = await _bot("reset", S1, "--database-url", sql_url)
    assert text.returncode == 0, text.stderr
    assert text.stdout.strip() == (
        f"reset {S1}: archived 0 messages as {S1}#g1; the next message starts fresh"
    )


async def test_reset_with_no_worker_says_it_is_queued(sql_store: SqlStore, sql_url: str) -> None:
    await sql_store.enqueue_turn(S1, "t1", TurnInput(text="hi"))

    done = await _bot("reset", S1, "--wait", "0.5", "--json", "--database-url", sql_url)

    assert done.returncode == 1, done.stderr
    [record] = _lines(done)
    assert (record["status"], record["session"]) == ("queued", S1)
    assert record["reset_id"].startswith("reset:")
    reset = await sql_store.get_turn(S1, record["reset_id"])
    assert reset is not None
    assert reset.status == TurnStatus.QUEUED
    text = await _bot("reset", "slack:T1:C1:none", "--database-url", sql_url)
    _one_line_error(text, 2, "reset")
