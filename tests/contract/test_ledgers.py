"""The `SessionStore` contract for what tools leave besides the transcript: confirmations (and the
follow-up turn an answer queues), effect receipts, and versioned facts.

Run against `memory`, `sqlite` and `postgres`; every refusal is checked to have changed nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from agent import (
    ConfirmationRequest,
    ConfirmationRequested,
    ConfirmationResolved,
    LeaseLostError,
    PolicyAnswerer,
    ReceiptStatus,
    ResumeConflictError,
    SessionStore,
    SessionSuspendedError,
    StepConflictError,
    TurnEvent,
    TurnInput,
    TurnStatus,
    UserAnswerer,
)
from agent._hitl_confirm import confirmation_digest
from agent._turn_input import ConfirmationAnswer
from agent.seams import (
    Answerer,
    ConfirmationRecord,
    ConfirmationStatus,
    FactRecord,
    Lease,
    ReceiptRecord,
    SessionStatus,
    StepCommit,
    StoreHandle,
    TurnRecord,
    answerers_to_json,
)

S = "slack:T1:C1:300.0"
TTL = 30.0
NOW = 1_000.0

Reopen = Callable[[], Awaitable[SessionStore]]


async def _leased(store: SessionStore, turn_id: str = "t1") -> Lease:
    await store.enqueue_turn(S, turn_id, TurnInput(text="hi"))
    lease = await store.acquire_lease(S, "w1", TTL, NOW)
    assert lease is not None
    return lease


# -- confirmations ------------------------------------------------------------------------------

PROPOSAL = ConfirmationRecord(
    session=S,
    confirmation_id="t1:c1",
    turn_id="t1",
    call_id="c1",
    tool="refund",
    arguments={"order": "A-1", "amount": 12.5},
    prompt='Allow refund with {"amount": 12.5, "order": "A-1"}?',
    answerers=UserAnswerer(user="U1"),
    created_at=NOW,
)


async def _proposed(store: SessionStore) -> Lease:
    """t1 proposed a write and finished, as `tool_steps._propose` and the turn's end commit."""
    lease = await _leased(store)
    requested = ConfirmationRequested(
        session=S,
        turn_id="t1",
        confirmation=ConfirmationRequest(
            id="t1:c1",
            turn_id="t1",
            call_id="c1",
            tool="refund",
            arguments=PROPOSAL.arguments,
            prompt=PROPOSAL.prompt,
            answerers=PROPOSAL.answerers,
        ),
    )
    await store.commit(
        lease,
        StepCommit(
            turn_id="t1",
            step_id="tool:0:c1",
            step_value={"status": "confirmation_pending"},
            events=[requested],
            confirmations=[PROPOSAL],
        ),
        TTL,
        NOW,
    )
    done = StepCommit(
        turn_id="t1", turn_status=TurnStatus.COMPLETED, session_status=SessionStatus.IDLE
    )
    await store.commit(lease, done, TTL, NOW)
    return lease


async def _answer(
    store: SessionStore,
    accepted: bool = True,
    by: str = "U1",
    alongside: Callable[[StoreHandle], None] | None = None,
) -> tuple[TurnRecord, list[TurnEvent]]:
    follow_up = TurnInput(
        text=f"{by} answered",
        confirmation=ConfirmationAnswer(
            confirmation_id="t1:c1",
            accepted=accepted,
            tool="refund",
            call_id="c1",
            arguments=PROPOSAL.arguments,
        ),
    )
    event = ConfirmationResolved(
        session=S, turn_id="confirm:t1:c1", confirmation_id="t1:c1", accepted=accepted, by=by
    )
    record, events = await store.resolve_confirmation(
        S,
        "t1:c1",
        accepted=accepted,
        by=by,
        follow_up_turn="confirm:t1:c1",
        follow_up=follow_up,
        events=[event],
        now=NOW + 60,
        alongside=alongside,
    )
    return record, list(events)


async def test_an_application_write_commits_with_the_answer_or_not_at_all(
    store: SessionStore,
) -> None:
    """`alongside` runs once, only when the answer is applied; if it raises, nothing is."""
    await _proposed(store)
    calls: list[str] = []

    def failing(handle: StoreHandle) -> None:
        calls.append("failing")
        raise RuntimeError("the application's write failed")

    with pytest.raises(RuntimeError):
        await _answer(store, alongside=failing)
    assert (await store.get_confirmation(S, "t1:c1")) == PROPOSAL
    assert await store.get_turn(S, "confirm:t1:c1") is None

    await _answer(store, alongside=lambda handle: calls.append("applied"))
    with pytest.raises(ResumeConflictError):
        await _answer(store, alongside=lambda handle: calls.append("again"))
    assert calls == ["failing", "applied"]
    assert (await store.get_turn(S, "confirm:t1:c1")) is not None


async def test_a_committed_confirmation_reads_back_as_proposed(store: SessionStore) -> None:
    await _proposed(store)
    assert await store.get_confirmation(S, "t1:c1") == PROPOSAL
    assert await store.get_confirmation(S, "nope") is None
    assert await store.get_confirmation("nope", "t1:c1") is None
    assert await store.list_confirmations(S) == [PROPOSAL]
    assert await store.list_confirmations(S, ConfirmationStatus.PENDING) == [PROPOSAL]
    assert await store.list_confirmations(S, ConfirmationStatus.ACCEPTED) == []


@pytest.mark.parametrize(
    "answerers",
    [
        None,
        UserAnswerer(user="Ü1"),
        PolicyAnswerer(policy="ops", scope="refunds"),
        PolicyAnswerer(policy="ops"),
        PolicyAnswerer(policy="ops", scope=None),
    ],
    ids=["none", "user", "policy", "policy-no-scope", "policy-null-scope"],
)
async def test_a_proposal_reads_back_with_its_answerers_and_its_digest(
    store: SessionStore, answerers: Answerer | None
) -> None:
    """Answerers come back typed and dump the JSON they were stored as: a scope never given
    stays absent (the digest a grant binds to hashes that JSON)."""
    lease = await _leased(store)
    proposal = replace(PROPOSAL, answerers=answerers)
    await store.commit(
        lease, StepCommit(turn_id="t1", step_id="tool:0:c1", confirmations=[proposal]), TTL, NOW
    )
    read = await store.get_confirmation(S, "t1:c1")
    assert read == proposal
    assert read is not None
    assert answerers_to_json(read.answerers) == answerers_to_json(answerers)
    assert confirmation_digest(read) == confirmation_digest(proposal)


async def test_resolving_answers_queues_the_follow_up_and_logs_events_at_once(
    store: SessionStore,
) -> None:
    await _proposed(store)

    turn, events = await _answer(store, accepted=True)

    assert [(e.seq, e.type) for e in events] == [(2, "confirmation.resolved")]
    assert (await store.read_events(S))[-1] == events[-1]
    answered = await store.get_confirmation(S, "t1:c1")
    assert answered == replace(
        PROPOSAL,
        status=ConfirmationStatus.ACCEPTED,
        by="U1",
        follow_up_turn="confirm:t1:c1",
        resolved_at=NOW + 60,
    )
    queued = await store.next_turn(S)
    assert queued == turn
    assert (queued.turn_id, queued.status) == ("confirm:t1:c1", TurnStatus.QUEUED)
    assert queued.input.confirmation is not None
    assert queued.input.confirmation.arguments == {"order": "A-1", "amount": 12.5}
    assert await store.list_confirmations(S, ConfirmationStatus.PENDING) == []


async def test_a_capability_confirmation_keeps_its_details(store: SessionStore) -> None:
    """The details a `confirmation="capability"` tool showed are stored with the proposal, read
    back exactly (nested JSON included), kept when it is answered, and carried by the follow-up
    turn, which the tool checks them against."""
    lease = await _leased(store)
    details = {"order": "A-1", "amount": 12.5, "lines": [{"sku": "F", "qty": 2}], "note": None}
    proposal = replace(
        PROPOSAL, prompt="Charge order A-1 $12.50?", arguments={"order": "A-1"}, details=details
    )
    await store.commit(
        lease, StepCommit(turn_id="t1", step_id="tool:0:c1", confirmations=[proposal]), TTL, NOW
    )
    assert await store.get_confirmation(S, "t1:c1") == proposal
    assert await store.list_confirmations(S) == [proposal]
    assert PROPOSAL.details is None, "a confirmation='required' proposal has no details"

    follow_up = TurnInput(
        text="U1 answered",
        confirmation=ConfirmationAnswer(
            confirmation_id="t1:c1",
            accepted=True,
            tool="refund",
            call_id="c1",
            arguments={"order": "A-1"},
            details=details,
        ),
    )
    await store.resolve_confirmation(
        S,
        "t1:c1",
        accepted=True,
        by="U1",
        follow_up_turn="confirm:t1:c1",
        follow_up=follow_up,
        events=[],
        now=NOW + 60,
    )
    answered = await store.get_confirmation(S, "t1:c1")
    assert answered is not None
    assert (answered.status, answered.details) == (ConfirmationStatus.ACCEPTED, details)
    queued = await store.get_turn(S, "confirm:t1:c1")
    assert queued is not None
    assert queued.input == follow_up
    assert queued.input.confirmation is not None
    assert queued.input.confirmation.details == details


async def test_a_confirmation_is_answered_once(store: SessionStore) -> None:
    await _proposed(store)
    await _answer(store, accepted=False)
    before = (await store.list_turns(S), await store.read_events(S))

    with pytest.raises(ResumeConflictError):
        await _answer(store, accepted=True, by="U2")

    assert (await store.list_turns(S), await store.read_events(S)) == before
    denied = await store.get_confirmation(S, "t1:c1")
    assert denied is not None
    assert (denied.status, denied.by) == (ConfirmationStatus.DENIED, "U1")


async def test_unknown_confirmations_and_sessions_are_conflicts(store: SessionStore) -> None:
    with pytest.raises(ResumeConflictError):
        await _answer(store)
    await _leased(store)
    with pytest.raises(ResumeConflictError):
        await _answer(store)
    assert [t.turn_id for t in await store.list_turns(S)] == ["t1"]


async def test_a_parked_session_refuses_the_answer_and_keeps_it_pending(
    store: SessionStore,
) -> None:
    lease = await _proposed(store)
    await store.enqueue_turn(S, "t2", TurnInput(text="park"))
    park = StepCommit(
        turn_id="t2",
        turn_status=TurnStatus.SUSPENDED,
        session_status=SessionStatus.SUSPENDED,
        set_pending=True,
        pending={"turn_id": "t2"},
    )
    await store.commit(lease, park, TTL, NOW)
    before = (await store.list_turns(S), await store.read_events(S))

    with pytest.raises(SessionSuspendedError):
        await _answer(store)

    assert (await store.list_turns(S), await store.read_events(S)) == before
    assert await store.get_confirmation(S, "t1:c1") == PROPOSAL


async def test_a_taken_follow_up_turn_id_leaves_the_confirmation_pending(
    store: SessionStore,
) -> None:
    await _proposed(store)
    await store.enqueue_turn(S, "confirm:t1:c1", TurnInput(text="squatter"))

    with pytest.raises(ResumeConflictError):
        await _answer(store)

    assert await store.get_confirmation(S, "t1:c1") == PROPOSAL
    assert len(await store.read_events(S)) == 1


async def test_a_duplicate_confirmation_id_conflicts_and_commits_nothing(
    store: SessionStore,
) -> None:
    lease = await _proposed(store)
    again = StepCommit(turn_id="t1", step_id="tool:0:c2", confirmations=[PROPOSAL])

    with pytest.raises(StepConflictError):
        await store.commit(lease, again, TTL, NOW)

    assert "tool:0:c2" not in await store.load_steps(S, "t1")
    assert await store.list_confirmations(S) == [PROPOSAL]


# -- receipts -----------------------------------------------------------------------------------

KEY = "charge:pi_1"


def _receipt(receipt_id: str, fingerprint: str = "fp1") -> ReceiptRecord:
    return ReceiptRecord(
        session=S,
        key=KEY,
        receipt_id=receipt_id,
        fingerprint=fingerprint,
        status=ReceiptStatus.PREPARED,
        turn_id="t1",
        step_id="tool:0:c1",
        created_at=NOW,
        updated_at=NOW,
    )


async def test_a_receipt_goes_from_prepared_to_completed(store: SessionStore) -> None:
    lease = await _leased(store)
    prepared = await store.prepare_receipt(lease, _receipt("r1"), TTL, NOW + 1)
    assert prepared == _receipt("r1")
    assert await store.get_receipt(S, KEY) == prepared
    session = await store.get_session(S)
    assert session is not None
    assert session.lease_expires_at == NOW + 1 + TTL, "preparing is fenced, and renews"

    settled = await store.settle_receipt(
        S, KEY, "r1", ReceiptStatus.COMPLETED, value={"charge": "ch_1"}, now=NOW + 2
    )

    assert settled == replace(
        prepared, status=ReceiptStatus.COMPLETED, value={"charge": "ch_1"}, updated_at=NOW + 2
    )
    assert await store.get_receipt(S, KEY) == settled
    assert await store.get_receipt(S, "other") is None


async def test_a_failed_receipt_may_be_prepared_again_as_a_new_attempt(
    store: SessionStore,
) -> None:
    lease = await _leased(store)
    await store.prepare_receipt(lease, _receipt("r1"), TTL, NOW)
    failed = await store.settle_receipt(
        S, KEY, "r1", ReceiptStatus.FAILED, error="declined", now=NOW + 1
    )
    assert (failed.status, failed.error) == (ReceiptStatus.FAILED, "declined")

    retried = await store.prepare_receipt(lease, _receipt("r2", "fp2"), TTL, NOW + 2)

    assert retried == replace(_receipt("r2", "fp2"), attempt=2)
    assert await store.get_receipt(S, KEY) == retried
    assert await store.list_receipts(session=S) == [retried]


@pytest.mark.parametrize(
    "status", [ReceiptStatus.PREPARED, ReceiptStatus.COMPLETED, ReceiptStatus.UNCERTAIN]
)
async def test_only_a_failed_receipt_may_be_prepared_again(
    store: SessionStore, status: ReceiptStatus
) -> None:
    lease = await _leased(store)
    await store.prepare_receipt(lease, _receipt("r1"), TTL, NOW)
    if status is not ReceiptStatus.PREPARED:
        await store.settle_receipt(S, KEY, "r1", status, now=NOW)
    before = await store.get_receipt(S, KEY)

    with pytest.raises(StepConflictError):
        await store.prepare_receipt(lease, _receipt("r2"), TTL, NOW)

    assert await store.get_receipt(S, KEY) == before


async def test_settling_needs_the_expected_status_and_receipt(store: SessionStore) -> None:
    lease = await _leased(store)
    await store.prepare_receipt(lease, _receipt("r1"), TTL, NOW)
    await store.settle_receipt(S, KEY, "r1", ReceiptStatus.UNCERTAIN, error="timeout", now=NOW)
    uncertain = await store.get_receipt(S, KEY)

    with pytest.raises(StepConflictError):
        await store.settle_receipt(S, KEY, "r1", ReceiptStatus.COMPLETED, value=1, now=NOW)
    with pytest.raises(StepConflictError):
        await store.settle_receipt(
            S,
            KEY,
            "r0",
            ReceiptStatus.COMPLETED,
            from_statuses=[ReceiptStatus.UNCERTAIN],
            now=NOW,
        )
    with pytest.raises(StepConflictError):
        await store.settle_receipt(S, "nope", "r1", ReceiptStatus.FAILED, now=NOW)
    assert await store.get_receipt(S, KEY) == uncertain

    resolved = await store.settle_receipt(
        S,
        KEY,
        "r1",
        ReceiptStatus.COMPLETED,
        value={"seen": True},
        from_statuses=[ReceiptStatus.UNCERTAIN],
        now=NOW + 5,
    )
    assert (resolved.status, resolved.value, resolved.error) == (
        ReceiptStatus.COMPLETED,
        {"seen": True},
        None,
    )


async def test_preparing_is_fenced_but_settling_is_not(store: SessionStore) -> None:
    zombie = await _leased(store)
    await store.prepare_receipt(zombie, _receipt("r1"), TTL, NOW)
    assert await store.acquire_lease(S, "w2", TTL, NOW + TTL + 1) is not None

    with pytest.raises(LeaseLostError):
        await store.prepare_receipt(zombie, replace(_receipt("r2"), key="other"), TTL, NOW)
    assert await store.get_receipt(S, "other") is None
    settled = await store.settle_receipt(S, KEY, "r1", ReceiptStatus.UNCERTAIN, now=NOW)
    assert settled.status is ReceiptStatus.UNCERTAIN


async def test_receipts_are_listed_across_sessions_oldest_first(store: SessionStore) -> None:
    lease = await _leased(store)
    await store.enqueue_turn("b", "t1", TurnInput(text="hi"))
    other = await store.acquire_lease("b", "w1", TTL, NOW)
    assert other is not None
    await store.prepare_receipt(lease, _receipt("r1"), TTL, NOW)
    await store.prepare_receipt(other, replace(_receipt("r2"), session="b"), TTL, NOW)
    await store.prepare_receipt(lease, replace(_receipt("r3"), key="mail:1"), TTL, NOW)
    await store.settle_receipt(S, KEY, "r1", ReceiptStatus.UNCERTAIN, now=NOW)

    assert [r.receipt_id for r in await store.list_receipts()] == ["r1", "r2", "r3"]
    assert [r.receipt_id for r in await store.list_receipts(session=S)] == ["r1", "r3"]
    uncertain = await store.list_receipts(status=ReceiptStatus.UNCERTAIN)
    assert [(r.session, r.receipt_id) for r in uncertain] == [(S, "r1")]
    assert await store.list_receipts(session="b", status=ReceiptStatus.COMPLETED) == []


async def test_a_reset_expires_a_pending_proposal_and_says_when(store: SessionStore) -> None:
    """An approval from before a reset never acts after it: the proposal reads back expired,
    with the time the reset retired it (`bot approvals --history` orders by it), on every store."""
    lease = await _proposed(store)
    await store.enqueue_reset(S, "reset:1")
    await store.apply_reset(lease, "reset:1", [], TTL, NOW + 5)

    retired = await store.get_confirmation(S, "t1:c1")
    assert retired is not None
    assert (retired.status, retired.resolved_at) == (ConfirmationStatus.EXPIRED, NOW + 5)
    with pytest.raises(ResumeConflictError):
        await _answer(store)


async def test_receipts_outlive_the_store_process_and_resets(
    store: SessionStore, reopen: Reopen
) -> None:
    lease = await _leased(store)
    prepared = await store.prepare_receipt(lease, _receipt("r1"), TTL, NOW)
    await store.enqueue_reset(S, "reset:1")
    await store.commit(lease, StepCommit(turn_id="t1", turn_status=TurnStatus.CANCELLED), TTL, NOW)
    await store.apply_reset(lease, "reset:1", [], TTL, NOW)

    later = await reopen()

    assert await later.get_receipt(S, KEY) == prepared
    assert await later.list_receipts(status=ReceiptStatus.PREPARED) == [prepared]


# -- facts --------------------------------------------------------------------------------------


def _fact(key: str, version: int, value: object) -> FactRecord:
    return FactRecord(
        session=S,
        key=key,
        version=version,
        value=value,
        turn_id="t1",
        step_id=f"tool:{version}:c",
        call_id="c",
        created_at=NOW + version,
    )


async def test_facts_are_versioned_and_read_back_latest_first(store: SessionStore) -> None:
    lease = await _leased(store)
    first = StepCommit(turn_id="t1", step_id="tool:1:c", facts=[_fact("plan", 1, {"a": 1})])
    await store.commit(lease, first, TTL, NOW)
    second = StepCommit(
        turn_id="t1",
        step_id="tool:2:c",
        facts=[_fact("plan", 2, {"a": 2}), _fact("owner", 1, "U1")],
    )
    await store.commit(lease, second, TTL, NOW)

    assert await store.get_fact(S, "plan") == _fact("plan", 2, {"a": 2})
    assert await store.fact_history(S, "plan") == [
        _fact("plan", 1, {"a": 1}),
        _fact("plan", 2, {"a": 2}),
    ]
    assert await store.get_fact(S, "owner") == _fact("owner", 1, "U1")
    assert await store.get_fact(S, "nope") is None
    assert await store.fact_history("nope", "plan") == []


@pytest.mark.parametrize("clash", ["committed before", "twice in the commit"])
async def test_a_duplicate_fact_version_conflicts_and_commits_nothing(
    store: SessionStore, clash: str
) -> None:
    lease = await _leased(store)
    await store.commit(
        lease, StepCommit(turn_id="t1", step_id="tool:1:c", facts=[_fact("plan", 1, 1)]), TTL, NOW
    )
    facts = [_fact("plan", 1, "again")]
    if clash == "twice in the commit":
        facts = [_fact("plan", 2, "x"), _fact("plan", 2, "y")]

    with pytest.raises(StepConflictError):
        await store.commit(
            lease, StepCommit(turn_id="t1", step_id="tool:2:c", facts=facts), TTL, NOW
        )

    assert await store.fact_history(S, "plan") == [_fact("plan", 1, 1)]
    assert list(await store.load_steps(S, "t1")) == ["tool:1:c"]
