"""Crash replay of a batch whose two calls each ask a person beside one that does not: a worker
is SIGKILLed at every commit boundary up to and just after the park, a new process takes the
turn up, and the turn parks on both requests exactly once; answered (in reverse order, from
another process), it completes with each call's own answer. The call that committed never runs
again; an asking call runs once per park attempt and once after its answer."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from agent import InputRequested, Runtime, ScriptedModel, ToolMessage, TurnStatus
from agent._tool_batch import in_call_order
from storage import SqlStore
from tests.support import children
from tests.support.crash_runs import start_batch_child
from tests.support.engine_fixtures import ASKS_AGENT, ASKS_SCRIPT, RUN_LOG_ENV, read_runs

SESSION, TURN = "crash:asks", "T1"
PARK = f"park:{TURN}:approve@a1"
BOUNDARIES = [
    "after:model:1",
    "before:tool:1:f",
    "after:tool:1:f",
    f"before:{PARK}",
    f"after:{PARK}",
]


async def _child(url: str, run_log: Path, *extra: str) -> children.Process:
    return await start_batch_child(url, SESSION, TURN, "asks", run_log, *extra)


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_sigkill_around_a_park_on_two_requests_parks_once_and_answers_bind(
    sql_url: str, tmp_path: Path, boundary: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_log = tmp_path / "runs.log"
    proc = await _child(sql_url, run_log, "--crash", boundary)
    try:
        line = await children.wait_line(proc, "AT ")
        assert line.split()[1] == boundary
    finally:
        await children.kill(proc)

    lines = await children.finish(await _child(sql_url, run_log, "--recover-only"))
    assert lines[-1].startswith("RESULT suspended"), lines

    monkeypatch.setenv(RUN_LOG_ENV, str(run_log))
    store = await SqlStore.open(sql_url)
    try:
        # Entered, with its recovery sweep, as a bot's is: a lease a child left behind (a close
        # cut short under load) is taken over once it expires instead of waited on for ever.
        async with Runtime(
            store, ScriptedModel(ASKS_SCRIPT), agent=ASKS_AGENT, recovery_interval=0.1
        ) as runtime:
            session = runtime.session(ASKS_AGENT, SESSION)
            waiting = await session.pending()
            assert [r.call_id for r in waiting] == ["a1", "a2"]
            requested = [
                e for e in await store.read_events(SESSION) if isinstance(e, InputRequested)
            ]
            assert len(requested) == 2, "the park was announced more than once"
            for request in reversed(waiting):
                await session.resume(TURN, request.id, request.call_id == "a2", by="host")
            async with asyncio.timeout(60):
                done = await session.result(TURN)
        stored = in_call_order(list(await store.load_transcript(SESSION)))
    finally:
        await store.close()

    assert done.status == TurnStatus.COMPLETED, done
    results = [m.result for m in stored if isinstance(m, ToolMessage)]
    assert results == [
        {"order": "41", "approved": False},
        {"part": "f"},
        {"order": "42", "approved": True},
    ]
    runs = Counter(read_runs(run_log))
    # The hook stops the process where it stands: after the model step nothing else had run.
    before_tools = boundary == "after:model:1"
    committed = BOUNDARIES.index(boundary) >= BOUNDARIES.index("after:tool:1:f")
    assert runs["fetch_part:f"] == (1 if committed or before_tools else 2), runs
    parked_first = boundary == f"after:{PARK}"
    for order in ("41", "42"):
        # asked before the crash (unless it came first), asked again by the new process
        # (unless the park had committed), and run once more with its answer
        expected = (0 if before_tools else 1) + (0 if parked_first else 1) + 1
        assert runs[f"ask_approval:{order}"] == expected, (order, runs)
