"""Retention (`prune_history`, `prune_receipts`) on every store: what goes, what stays, and
what is never touched (a live or parked session, the transcript, undelivered events).

Turns are driven through the store seam with explicit times (`NOW`), so "older than" is a
cutoff after `NOW` rather than a wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from alembic import command
from sqlalchemy import Connection, text

from agent import (
    AssistantMessage,
    SessionStore,
    TextBlock,
    TurnCompleted,
    TurnInput,
    TurnStarted,
    TurnStatus,
    UserMessage,
)
from agent.seams import (
    ConfirmationRecord,
    Lease,
    PruneCounts,
    ReceiptRecord,
    ReceiptStatus,
    SessionStatus,
    StepCommit,
)
from storage import SqlStore, upgrade_database
from storage.migrate import alembic_config
from storage.sql.dialects import dialect_for

S = "slack:T1:C1:100.0"
TTL = 30.0
NOW = 1_000.0
LATER = NOW + 10.0
"""A cutoff after every turn here finished: they are all older than it."""


async def _lease(store: SessionStore, session: str = S) -> Lease:
    lease = await store.acquire_lease(session, "w1", TTL, NOW)
    assert lease is not None
    return lease


async def _turn(
    store: SessionStore, turn_id: str, idx: int, *, session: str = S, finish: bool = True
) -> Lease:
    """A turn as the engine commits it: opening, one model step, then its end (with `finish`)."""
    await store.enqueue_turn(session, turn_id, TurnInput(text=f"hi {turn_id}"))
    lease = await _lease(store, session)
    opening = StepCommit(
        turn_id=turn_id,
        step_id=f"input:{turn_id}:open",
        step_value={"text": "hi"},
        messages=[(idx, UserMessage(turn_id=turn_id, text=f"hi {turn_id}"))],
        events=[TurnStarted(session=session, turn_id=turn_id, text="hi")],
        turn_status=TurnStatus.RUNNING,
        session_status=SessionStatus.RUNNING,
    )
    await store.commit(lease, opening, TTL, NOW)
    reply = AssistantMessage(
        turn_id=turn_id, content=[TextBlock(text=f"answer {turn_id}")], stop_reason="end_turn"
    )
    await store.commit(
        lease,
        StepCommit(
            turn_id=turn_id,
            step_id=f"model:{idx + 1}",
            step_value={"ok": True},
            messages=[(idx + 1, reply)],
        ),
        TTL,
        NOW,
    )
    if finish:
        await store.commit(
            lease,
            StepCommit(
                turn_id=turn_id,
                events=[TurnCompleted(session=session, turn_id=turn_id, text=f"answer {turn_id}")],
                turn_status=TurnStatus.COMPLETED,
                turn_result={"text": f"answer {turn_id}"},
                session_status=SessionStatus.IDLE,
            ),
            TTL,
            NOW,
        )
        await store.release_lease(lease)
    return lease


async def _prune_all(
    store: SessionStore,
    *,
    before: float = LATER,
    limit: int = 500,
    dry_run: bool = False,
    delivered: Mapping[str, int] | None = None,
) -> PruneCounts:
    async def cursors(sessions: Sequence[str]) -> Mapping[str, int]:
        assert delivered is not None
        return {key: seq for key, seq in delivered.items() if key in sessions}

    total, after = PruneCounts(), 0
    while after is not None:
        counts, after = await store.prune_history(
            before=before,
            after=after,
            limit=limit,
            dry_run=dry_run,
            delivered=cursors if delivered is not None else None,
        )
        total += counts
    return total


async def test_a_finished_turn_loses_its_steps_and_events_and_keeps_its_row(
    store: SessionStore,
) -> None:
    await _turn(store, "t1", 0)
    before = await store.get_turn(S, "t1")
    transcript = await store.load_transcript(S)

    counts = await _prune_all(store)

    assert counts == PruneCounts(turns=1, steps=2, events=2)
    assert await store.load_steps(S, "t1") == {}
    assert await store.read_events(S) == []
    assert await store.get_turn(S, "t1") == before  # the tombstone: status and result kept
    assert await store.load_transcript(S) == transcript  # the model's context is untouched
    assert len(transcript) == 2
    # Pruned once is pruned: nothing is counted twice.
    assert await _prune_all(store) == PruneCounts()


async def test_seqs_go_on_after_a_prune(store: SessionStore) -> None:
    await _turn(store, "t1", 0)
    await _prune_all(store)
    await _turn(store, "t2", 2)

    seqs = [event.seq for event in await store.read_events(S)]
    assert seqs == [3, 4]  # never reused: t1 had 1 and 2
    assert [event.seq for event in await store.read_events(S, after_seq=2)] == [3, 4]


async def test_only_turns_that_ended_before_the_cutoff_go(store: SessionStore) -> None:
    await _turn(store, "t1", 0)
    assert await _prune_all(store, before=NOW) == PruneCounts()  # ended at NOW, not before
    assert len(await store.read_events(S)) == 2


async def test_a_live_session_is_held_whole(store: SessionStore) -> None:
    await _turn(store, "t1", 0)
    await store.enqueue_turn(S, "t2", TurnInput(text="queued"))

    assert await _prune_all(store) == PruneCounts(held=1)
    assert len(await store.load_steps(S, "t1")) == 2
    assert len(await store.read_events(S)) == 2


async def test_a_parked_session_is_held_whole(store: SessionStore) -> None:
    await _turn(store, "t1", 0)
    lease = await _turn(store, "t2", 2, finish=False)
    await store.commit(
        lease,
        StepCommit(
            turn_id="t2",
            step_id="park:t2",
            step_value={"asked": True},
            turn_status=TurnStatus.SUSPENDED,
            session_status=SessionStatus.SUSPENDED,
            pending={"turn_id": "t2", "request": {"id": "approve"}},
            set_pending=True,
        ),
        TTL,
        NOW,
    )

    assert await _prune_all(store) == PruneCounts(held=1)
    assert len(await store.load_steps(S, "t1")) == 2


async def test_a_session_with_a_pending_confirmation_is_held(store: SessionStore) -> None:
    await _turn(store, "t1", 0)
    lease = await _turn(store, "t2", 2, finish=False)
    proposal = ConfirmationRecord(
        session=S,
        confirmation_id="t2:c1",
        turn_id="t2",
        call_id="c1",
        tool="refund",
        arguments={"order": "A-1"},
        prompt="Refund A-1?",
        created_at=NOW,
    )
    await store.commit(
        lease,
        StepCommit(
            turn_id="t2",
            step_id="confirm:3",
            step_value={"proposed": True},
            confirmations=[proposal],
            turn_status=TurnStatus.COMPLETED,
            turn_result={"text": "proposed"},
            session_status=SessionStatus.IDLE,
        ),
        TTL,
        NOW,
    )

    assert await _prune_all(store) == PruneCounts(held=2)
    assert len(await store.load_steps(S, "t1")) == 2


async def test_a_dry_run_counts_what_a_prune_removes_and_removes_nothing(
    store: SessionStore,
) -> None:
    for n, session in enumerate(("slack:T1:C1:1.0", "slack:T1:C1:2.0", "slack:T1:C1:3.0")):
        await _turn(store, f"t{n}", 0, session=session)

    counted = await _prune_all(store, dry_run=True, limit=1)
    assert counted == PruneCounts(turns=3, steps=6, events=6)
    assert len(await store.read_events("slack:T1:C1:2.0")) == 2

    assert await _prune_all(store, limit=1) == counted  # in batches of one turn
    assert await store.read_events("slack:T1:C1:2.0") == []


async def test_batches_page_through_in_queue_order(store: SessionStore) -> None:
    await _turn(store, "t1", 0)
    await _turn(store, "t2", 2)
    await _turn(store, "t3", 4)

    first, after = await store.prune_history(before=LATER, limit=2)
    assert first.turns == 2
    assert after is not None
    assert await store.load_steps(S, "t3") != {}
    rest, done = await store.prune_history(before=LATER, after=after, limit=2)
    assert (rest.turns, done) == (1, None)
    assert await store.load_steps(S, "t3") == {}


async def test_events_not_yet_delivered_are_kept(store: SessionStore) -> None:
    await _turn(store, "t1", 0)

    counts = await _prune_all(store, delivered={S: 1})
    assert counts == PruneCounts(turns=0, steps=2, events=1, held=1)
    assert [event.seq for event in await store.read_events(S)] == [2]

    # Once the renderer has shown the rest, the next prune finishes the turn.
    assert await _prune_all(store, delivered={S: 2}) == PruneCounts(turns=1, events=1)
    assert await store.read_events(S) == []


async def test_an_old_archived_generation_goes_and_the_live_one_stays(
    store: SessionStore,
) -> None:
    await _turn(store, "t1", 0)
    await store.enqueue_reset(S, "reset:1")
    lease = await _lease(store)
    await store.apply_reset(lease, "reset:1", [], TTL, NOW)
    await store.release_lease(lease)
    archived = await store.read_archive(S, 0)
    assert len(archived.messages) == 2
    await _turn(store, "t2", 0)  # the live generation

    counts = await _prune_all(store)

    assert counts.generations == 1
    assert counts.archived_rows == 6  # two messages, two steps, two events of generation 0
    emptied = await store.read_archive(S, 0)
    assert (emptied.messages, emptied.steps, emptied.events) == ([], {}, [])
    assert len(await store.load_transcript(S)) == 2  # t2's opening and reply stay
    assert (await store.get_turn(S, "t1")) is not None


def _receipt(key: str) -> ReceiptRecord:
    return ReceiptRecord(
        session=S,
        key=key,
        receipt_id=f"r-{key}",
        fingerprint="f",
        status=ReceiptStatus.PREPARED,
        turn_id="t1",
        step_id="tool:0:c1",
        created_at=NOW,
        updated_at=NOW,
    )


async def test_receipts_go_only_when_asked_and_never_uncertain_ones(store: SessionStore) -> None:
    lease = await _turn(store, "t1", 0, finish=False)
    for key in ("refund:done", "refund:unknown"):
        await store.prepare_receipt(lease, _receipt(key), TTL, NOW)
    await store.settle_receipt(
        S, "refund:done", "r-refund:done", ReceiptStatus.COMPLETED, value={"id": 1}, now=NOW
    )
    await store.settle_receipt(
        S, "refund:unknown", "r-refund:unknown", ReceiptStatus.UNCERTAIN, now=NOW
    )
    # While t1 runs its session is live: nothing goes.
    assert await store.prune_receipts(before=LATER) == (0, None)
    await store.commit(lease, StepCommit(turn_id="t1", turn_status=TurnStatus.COMPLETED), TTL, NOW)

    await _prune_all(store)
    assert await store.get_receipt(S, "refund:done") is not None  # history prune keeps them
    assert await store.prune_receipts(before=LATER, dry_run=True) == (1, None)
    assert await store.get_receipt(S, "refund:done") is not None
    assert await store.prune_receipts(before=LATER) == (1, None)
    assert await store.get_receipt(S, "refund:done") is None
    kept = await store.get_receipt(S, "refund:unknown")
    assert kept is not None
    assert kept.status is ReceiptStatus.UNCERTAIN


async def test_migration_0007_dates_turns_that_ended_before_it_no_earlier_than_they_did(
    tmp_path: Path,
) -> None:
    """A turn from before the revision gets its session's last activity as its end: never
    earlier than it really ended, so none is pruned sooner than its retention says."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}"
    executor = dialect_for(url).executor()

    def to_0006(connection: Connection) -> None:
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
        connection.execute(
            text("insert into sessions (key, status, updated_at) values ('s', 'idle', 500)")
        )
        for turn_id, status in (("done", "completed"), ("waiting", "queued")):
            connection.execute(
                text(
                    "insert into turns (session_key, turn_id, status, input, created_at) "
                    "values ('s', :t, :s, '{}', 100)"
                ),
                {"t": turn_id, "s": status},
            )

    try:
        await executor.write(to_0006)
    finally:
        await executor.close()
    await upgrade_database(url)
    store = await SqlStore.open(url)
    try:
        rows = await store.run_sync(
            lambda c: dict(c.execute(text("select turn_id, finished_at from turns")).all())
        )
    finally:
        await store.close()
    assert rows == {"done": 500.0, "waiting": None}
