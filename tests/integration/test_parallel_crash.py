"""Crash replay of a batch whose three remote calls run side by side: a worker is SIGKILLed at
every commit boundary of the turn (the calls commit in the order they finish, y, z then x), then
a new process completes it. A call whose result committed never runs again; one that had not
committed runs again; every call has exactly one result, in call order."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from agent import AssistantMessage, ToolMessage, UserMessage
from agent._tool_batch import in_call_order
from storage import SqlStore
from tests.support import children
from tests.support.crash_runs import start_batch_child
from tests.support.engine_fixtures import read_runs

SESSION, TURN = "crash:s", "T1"
BOUNDARIES = [
    "after:model:1",
    "before:tool:1:y",
    "after:tool:1:y",
    "before:tool:1:z",
    "after:tool:1:z",
    "before:tool:1:x",
    "after:tool:1:x",
    "before:model:5",
]
"""In the order a run reaches them: the results commit as their calls finish."""


async def _child(url: str, run_log: Path, *extra: str) -> children.Process:
    return await start_batch_child(url, SESSION, TURN, "parts", run_log, *extra)


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_sigkill_at_each_boundary_of_a_parallel_batch_runs_no_finished_call_again(
    sql_url: str, tmp_path: Path, boundary: str
) -> None:
    run_log = tmp_path / "runs.log"
    proc = await _child(sql_url, run_log, "--crash", boundary)
    try:
        line = await children.wait_line(proc, "AT ")
        assert line.split()[1] == boundary
    finally:
        await children.kill(proc)
    before = Counter(read_runs(run_log))
    if boundary != "after:model:1":
        # The first result commits while the other two calls still run: they ran side by side.
        assert set(before) == {"fetch_part:x", "fetch_part:y", "fetch_part:z"}, before

    lines = await children.finish(await _child(sql_url, run_log))
    assert lines[-1] == "RESULT completed Fetched 3 parts."

    store = await SqlStore.open(sql_url)
    try:
        stored = await store.load_transcript(SESSION)
        steps = await store.load_steps(SESSION, TURN)
        events = await store.read_events(SESSION)
    finally:
        await store.close()
    transcript = in_call_order(list(stored))
    assert [type(m) for m in transcript] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        ToolMessage,
        ToolMessage,
        AssistantMessage,
    ]
    results = [m.result for m in transcript if isinstance(m, ToolMessage)]
    assert results == [{"part": "x"}, {"part": "y"}, {"part": "z"}], "one each, in call order"
    assert set(steps) == {"model:1", "tool:1:x", "tool:1:y", "tool:1:z", "model:5"}
    assert Counter(e.type for e in events)["action.completed"] == 3

    runs = Counter(read_runs(run_log))
    crashed_at = BOUNDARIES.index(boundary)
    for call in "xyz":
        committed = crashed_at >= BOUNDARIES.index(f"after:tool:1:{call}")
        if committed:
            assert runs[f"fetch_part:{call}"] == 1, f"{call} committed, then ran again: {runs}"
        elif boundary != "after:model:1":
            assert runs[f"fetch_part:{call}"] == 2, f"{call} had not committed: {runs}"
        else:
            assert runs[f"fetch_part:{call}"] == 1, runs
