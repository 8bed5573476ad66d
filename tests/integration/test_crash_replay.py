"""Crash replay with real processes: a worker is SIGKILLed at every commit boundary of a turn with
a two-call batch, then a new process completes the turn. Nothing is duplicated, no finished step
runs again, and the local tool's store write exists exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from agent import AssistantMessage, ToolMessage, UserMessage
from storage import SqlStore
from tests.support import children
from tests.support.engine_fixtures import RUN_LOG_ENV, count_orders, read_runs

BOUNDARIES = [
    "before:opening",
    "after:opening",
    "before:model:1",
    "after:model:1",
    "before:tool:1:a",
    "after:tool:1:a",
    "before:tool:1:b",
    "after:tool:1:b",
    "before:model:4",
    "after:model:4",
]


async def _child(url: str, turn: str, run_log: Path, *extra: str) -> children.Process:
    return await children.start(
        "tests.support.crash_child", url, "crash:s", turn, *extra, env={RUN_LOG_ENV: str(run_log)}
    )


async def _crash_at(url: str, turn: str, run_log: Path, boundary: str) -> None:
    proc = await _child(url, turn, run_log, "--crash", boundary)
    try:
        line = await children.wait_line(proc, "AT ")
        assert line.split()[1] == boundary
    finally:
        await children.kill(proc)


async def _complete(url: str, turn: str, run_log: Path, *extra: str) -> list[str]:
    return await children.finish(await _child(url, turn, run_log, *extra))


async def _final_state(url: str) -> tuple[list[object], list[str], list[str], int]:
    store = await SqlStore.open(url)
    try:
        transcript = await store.load_transcript("crash:s")
        steps = list((await store.load_steps("crash:s", "T1")).keys())
        events = await store.read_events("crash:s")
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
    finally:
        await store.close()
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            orders = await conn.run_sync(count_orders)
    finally:
        await engine.dispose()
    return transcript, steps, [e.type for e in events], orders


async def _assert_outbox_matches_steps(url: str) -> None:
    """Every committed step has its events and no event exists without its step: they are one
    transaction, whatever the moment the process died."""
    store = await SqlStore.open(url)
    try:
        transcript = await store.load_transcript("crash:s")
        steps = list((await store.load_steps("crash:s", "T1")).keys())
        types = Counter(e.type for e in await store.read_events("crash:s"))
    finally:
        await store.close()
    calls = sum(len(m.tool_calls) for m in transcript if isinstance(m, AssistantMessage))
    assert types["turn.started"] == sum(isinstance(m, UserMessage) for m in transcript)
    assert types["message.completed"] == len([s for s in steps if s.startswith("model:")])
    assert types["action.requested"] == calls
    assert types["action.completed"] == len([s for s in steps if s.startswith("tool:")])
    assert len(transcript) == types["turn.started"] + len(steps)
    final = any(isinstance(m, AssistantMessage) and not m.tool_calls for m in transcript)
    assert types["turn.completed"] == int(final)


@pytest.mark.parametrize("boundary", BOUNDARIES)
async def test_sigkill_at_each_boundary_then_redelivery_completes_once(
    sql_url: str, tmp_path: Path, boundary: str
) -> None:
    run_log = tmp_path / "runs.log"
    await _crash_at(sql_url, "T1", run_log, boundary)
    await _assert_outbox_matches_steps(sql_url)
    runs_before = read_runs(run_log)
    lines = await _complete(sql_url, "T1", run_log)

    assert lines[-1] == "RESULT completed Ordered 2 mugs."
    transcript, steps, event_types, orders = await _final_state(sql_url)
    assert [type(m) for m in transcript] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        ToolMessage,
        AssistantMessage,
    ]
    assert [m.call_id for m in transcript if isinstance(m, ToolMessage)] == ["a", "b"]
    assert steps == ["model:1", "tool:1:a", "tool:1:b", "model:4"]
    assert event_types == [
        "turn.started",
        "message.completed",
        "action.requested",
        "action.requested",
        "action.completed",
        "action.completed",
        "message.completed",
        "turn.completed",
    ]
    assert orders == 1, "the local tool's write must exist exactly once"

    deltas = [line[6:] for line in lines if line.startswith("DELTA ")]
    committed = BOUNDARIES.index(boundary)
    if committed >= BOUNDARIES.index("after:model:1"):
        assert "Let me " not in deltas, "a cached model step must not stream again"
    if committed >= BOUNDARIES.index("after:model:4"):
        assert deltas == []
    runs_after = read_runs(run_log)[len(runs_before) :]
    if committed >= BOUNDARIES.index("after:tool:1:a"):
        assert "lookup_stock" not in runs_after, "a finished tool step ran again"
    if committed >= BOUNDARIES.index("after:tool:1:b"):
        assert "create_order" not in runs_after


@pytest.mark.parametrize("boundary", ["after:model:1", "before:tool:1:b", "after:tool:1:b"])
async def test_dead_worker_turn_resumes_without_redelivery(
    sql_url: str, tmp_path: Path, boundary: str
) -> None:
    """Only the lease expiring brings the turn back: nobody re-delivers it."""
    run_log = tmp_path / "runs.log"
    await _crash_at(sql_url, "T1", run_log, boundary)
    lines = await _complete(sql_url, "T1", run_log, "--recover-only")
    assert lines[-1] == "RESULT completed Ordered 2 mugs."
    transcript, steps, _, orders = await _final_state(sql_url)
    assert len(transcript) == 5
    assert steps == ["model:1", "tool:1:a", "tool:1:b", "model:4"]
    assert orders == 1


async def test_crash_mid_batch_resumes_only_the_remaining_call(
    sql_url: str, tmp_path: Path
) -> None:
    run_log = tmp_path / "runs.log"
    await _crash_at(sql_url, "T1", run_log, "after:tool:1:a")
    assert read_runs(run_log) == ["lookup_stock"]
    await _complete(sql_url, "T1", run_log)
    assert read_runs(run_log) == ["lookup_stock", "create_order"]


async def test_cancel_is_durable_across_sigkill_and_recovery(sql_url: str, tmp_path: Path) -> None:
    """Cancelled while its worker was stuck mid-batch, then the worker died: the recovered turn
    ends cancelled instead of running again."""
    run_log = tmp_path / "runs.log"
    proc = await _child(sql_url, "T1", run_log, "--crash", "before:tool:1:a")
    try:
        assert (await children.wait_line(proc, "")).startswith("DELTA")
        await children.wait_line(proc, "AT ")
        store = await SqlStore.open(sql_url)
        try:
            cancelled = await store.request_cancel("crash:s", "T1", "user said stop")
        finally:
            await store.close()
        assert cancelled is not None
    finally:
        await children.kill(proc)
    runs_before = read_runs(run_log)
    lines = await _complete(sql_url, "T1", run_log, "--recover-only")
    assert lines[-1] == "RESULT cancelled Let me check."
    assert read_runs(run_log) == runs_before, "nothing ran after the cancel"
    transcript, _steps, event_types, orders = await _final_state(sql_url)
    assert [type(m) for m in transcript] == [
        UserMessage,
        AssistantMessage,
        ToolMessage,
        ToolMessage,
    ]
    assert [m.result for m in transcript if isinstance(m, ToolMessage)] == [
        {"cancelled": True},
        {"cancelled": True},
    ]
    assert event_types[-1] == "turn.cancelled"
    assert orders == 0
