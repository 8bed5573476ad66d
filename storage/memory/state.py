"""What `MemoryStore` keeps per session, and the turn-queue and commit operations on it.

The state holds the rows SQL would hold (mappings keyed by the SQL column names, JSON as text),
so records are built by the same functions on both stores. There is no rollback here: every
operation checks everything that could refuse it first, then writes, so a refusal leaves nothing
behind, as a rolled-back transaction would.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count
from typing import Any, NoReturn

from agent.seams import (
    ArchivedGeneration,
    CancelReason,
    ConfirmationStatus,
    FatalToolError,
    JsonValue,
    ResumeConflictError,
    SessionStatus,
    SessionSuspendedError,
    StepCommit,
    StepConflictError,
    TimerKind,
    TurnEvent,
    TurnKind,
    TurnRecord,
    TurnStatus,
    VoteRecord,
)
from storage.json_text import canonical_json, dump_json, load_json
from storage.ledger_records import archived_generation
from storage.records import (
    UNFINISHED_VALUES,
    EncodedCommit,
    EventRow,
    applied_reset,
    encode_events,
    event_rows,
    message_rows,
    parked_on_other_turn,
    step_row,
    suspended_message,
    turn_changes,
    turn_record,
)

Rows = dict[str, Any]


class RowIds:
    """Per-table row ids, as SQL's auto-increment keys: they give queue and commit order."""

    def __init__(self) -> None:
        self._counters: defaultdict[str, Iterator[int]] = defaultdict(lambda: count(1))

    def next(self, table: str) -> int:
        return next(self._counters[table])


@dataclass
class SessionState:
    key: str
    status: str = SessionStatus.NEW.value
    generation: int = 0
    lease_owner: str | None = None
    lease_epoch: int = 0
    lease_expires_at: float = 0.0
    event_seq: int = 0
    pending: str | None = None
    updated_at: float = 0.0
    """As the `sessions` column: set where the SQL store sets it (created, a fenced commit, a
    lease taken, a park ended, a confirmation answered)."""
    turns: dict[str, Rows] = field(default_factory=dict)
    messages: dict[int, Rows] = field(default_factory=dict)
    steps: dict[str, Rows] = field(default_factory=dict)
    """step id -> row; dicts keep insertion order, which is commit order."""
    events: list[Rows] = field(default_factory=list)
    confirmations: dict[str, Rows] = field(default_factory=dict)
    receipts: dict[str, Rows] = field(default_factory=dict)
    facts: dict[tuple[str, int], Rows] = field(default_factory=dict)
    timers: dict[tuple[str, str, str, str], Rows] = field(default_factory=dict)
    """(kind, turn id, request id, action) -> the `approval_timers` row."""
    votes: list[VoteRecord] = field(default_factory=list)
    """Quorum votes in the order cast (the `approval_votes` rows)."""
    archive: dict[int, dict[str, list[Rows]]] = field(default_factory=dict)

    def row(self) -> Rows:
        """The `sessions` row."""
        return {
            "key": self.key,
            "status": self.status,
            "generation": self.generation,
            "lease_owner": self.lease_owner,
            "lease_epoch": self.lease_epoch,
            "lease_expires_at": self.lease_expires_at,
            "pending": self.pending,
            "updated_at": self.updated_at,
        }

    def append_events(self, rows: Sequence[EventRow]) -> int:
        """Log encoded events; returns the last seq (the first is `last - len(rows) + 1`)."""
        self.event_seq += len(rows)
        self.events.extend(event_rows(self.key, rows, self.event_seq))
        return self.event_seq

    def turns_in_order(self) -> list[Rows]:
        return sorted(self.turns.values(), key=lambda row: int(row["id"]))

    def drop_request_timers(self, kind: str, turn_id: str, request_id: str) -> None:
        """Every timer of one request (it ended): its expiry, reminder and escalation."""
        for key in [k for k in self.timers if k[:3] == (kind, turn_id, request_id)]:
            del self.timers[key]

    def drop_input_timers(self, turn_id: str, request_id: str | None = None) -> None:
        """As `sql_parks.drop_input_timers`: a park ended, its timers have nothing left to do
        (with `request_id`, only that request's)."""
        for key in [k for k in self.timers if k[0] == TimerKind.INPUT and k[1] == turn_id]:
            if request_id is None or key[2] == request_id:
                del self.timers[key]

    def end_park(self, rows: Sequence[EventRow], now: float) -> int:
        """As `sql_parks._end_park`: `running`, no `pending`, `rows` logged; the last seq."""
        self.status = SessionStatus.RUNNING.value
        self.pending = None
        self.updated_at = now
        return self.append_events(rows)


class NoHandle:
    def unwrap(self) -> NoReturn:
        raise FatalToolError("this backend has no transactional store handle")


# -- the turn queue -----------------------------------------------------------------------------


def reset_pending(state: SessionState) -> bool:
    """As `sql_turns.reset_pending`: a queued reset will cancel any park."""
    return any(
        turn["kind"] == TurnKind.RESET and turn["status"] in UNFINISHED_VALUES
        for turn in state.turns.values()
    )


def refuses(state: SessionState, turn_id: str) -> bool:
    """Whether a new turn must be refused: the session is parked on another turn, and no reset
    is pending that would cancel the park (a turn may queue behind that)."""
    return (
        turn_id not in state.turns
        and parked_on_other_turn(state.status, state.pending, turn_id)
        and not reset_pending(state)
    )


def enqueue(
    state: SessionState,
    ids: RowIds,
    row: Rows,
    *,
    refuse_if_parked: bool,
    cancel_unfinished: str | None,
) -> tuple[TurnRecord, bool]:
    existing = state.turns.get(row["turn_id"])
    if existing is not None:
        return turn_record(existing), False
    if refuse_if_parked and refuses(state, row["turn_id"]):
        raise SessionSuspendedError(suspended_message(state.key, state.pending))
    if cancel_unfinished is not None:
        for other in state.turns.values():
            if (
                other["status"] in UNFINISHED_VALUES
                and other["kind"] == TurnKind.TURN
                and other["cancel_reason"] is None
            ):
                other["cancel_reason"] = cancel_unfinished
    created = {**row, "id": ids.next("turns"), "generation": state.generation}
    if not state.updated_at:  # as the SQL store's session row, inserted with the first turn
        state.updated_at = float(row["created_at"])
    state.turns[row["turn_id"]] = created
    return turn_record(created), True


def request_cancel(state: SessionState, turn_id: str, reason: str) -> TurnRecord | None:
    turn = state.turns.get(turn_id)
    if turn is None or turn["status"] not in UNFINISHED_VALUES or turn["kind"] != TurnKind.TURN:
        return None
    if turn["cancel_reason"] is None:
        turn["cancel_reason"] = reason
    return turn_record(turn)


def resume(
    state: SessionState | None,
    ids: RowIds,
    turn_id: str,
    expected_pending: JsonValue,
    answers: Mapping[str, JsonValue],
    new_events: Sequence[EventRow],
    *,
    before_write: Callable[[], None] = lambda: None,
    still_pending: JsonValue = None,
    request_id: str | None = None,
) -> int:
    """As `sql_parks.resume`; `answers`: the answer's step, then its notes. The last seq."""
    if (
        state is None
        or state.status != SessionStatus.SUSPENDED
        or state.pending != canonical_json(expected_pending)
    ):
        raise ResumeConflictError(
            "the session is not parked on that request (answered already, changed, or reset)"
        )
    if reset_pending(state):
        raise ResumeConflictError("a reset of the session is queued; the park will be cancelled")
    turn = state.turns.get(turn_id)
    if turn is None or turn["status"] != TurnStatus.SUSPENDED:
        raise ResumeConflictError(f"turn {turn_id!r} is not the parked turn")
    for step_id in answers:
        if step_id in state.steps:
            raise ResumeConflictError(f"step {step_id!r} was answered already")
    values = {step_id: dump_json(answer) for step_id, answer in answers.items()}
    before_write()
    for step_id, value in values.items():
        state.steps[step_id] = {
            **step_row(state.key, turn_id, step_id, value),
            "id": ids.next("steps"),
        }
    if still_pending is not None:  # other requests of the turn still wait: the park goes on
        state.drop_input_timers(turn_id, request_id)
        state.pending = canonical_json(still_pending)
        state.updated_at = time.time()
        return state.append_events(new_events)
    turn["status"] = TurnStatus.QUEUED.value
    state.drop_input_timers(turn_id)
    return state.end_park(new_events, time.time())


def stop_session(
    state: SessionState,
    reason: str,
    by: str | None,
    now: float,
    ended_park: Callable[[JsonValue], Sequence[TurnEvent]] | None,
) -> tuple[list[TurnRecord], list[TurnEvent], int]:
    """As `sql_parks.stop_session`. The events are encoded before anything is written."""
    logged: list[TurnEvent] = []
    rows: list[EventRow] = []
    parked = None
    if state.status == SessionStatus.SUSPENDED and state.pending is not None:
        pending = load_json(state.pending)
        logged = list(ended_park(pending)) if ended_park is not None else []
        rows = encode_events(state.key, logged)
        parked_turn = pending.get("turn_id") if isinstance(pending, dict) else None
        parked = state.turns.get(str(parked_turn))
        if parked is not None and parked["status"] != TurnStatus.SUSPENDED:
            parked = None
    stopped: list[TurnRecord] = []
    for turn in state.turns_in_order():
        if (
            turn["status"] in UNFINISHED_VALUES
            and turn["kind"] == TurnKind.TURN
            and turn["cancel_reason"] is None
        ):
            _ask_to_stop(turn, reason, by)
            stopped.append(turn_record(turn))
    last_seq = 0
    if state.status == SessionStatus.SUSPENDED and state.pending is not None:
        if parked is not None:
            parked["status"] = TurnStatus.QUEUED.value
            _ask_to_stop(parked, reason, by)
            state.drop_input_timers(parked["turn_id"])
            stopped.append(turn_record(parked))
        last_seq = state.end_park(rows, now)
    return stopped, logged, last_seq


def _ask_to_stop(turn: Rows, reason: str, by: str | None) -> None:
    if turn["cancel_reason"] is None:
        turn["cancel_reason"] = reason
        turn["cancelled_by"] = by


# -- step commits -------------------------------------------------------------------------------


def apply_commit(
    state: SessionState,
    ids: RowIds,
    commit: StepCommit,
    encoded: EncodedCommit,
    lease_expires_at: float,
    now: float,
) -> int:
    """Check every key first, then write: a conflict must leave nothing behind, as on SQL.

    Returns the last event seq reserved for the commit's events.
    """
    indexes = [m.idx for m in encoded.messages]
    confirmation_ids = [row["confirmation_id"] for row in encoded.confirmations]
    versions = [(row["key"], row["version"]) for row in encoded.facts]
    timers = [timer_key(row) for row in encoded.timers]
    if (
        (commit.step_id is not None and commit.step_id in state.steps)
        or _clash(indexes, state.messages)
        or _clash(confirmation_ids, state.confirmations)
        or _clash(versions, state.facts)
        or _clash(timers, state.timers)
    ):
        raise StepConflictError(
            f"session {state.key!r} already has step {commit.step_id!r}, one of message indexes "
            f"{indexes}, or one of the commit's confirmations or fact versions"
        )
    state.lease_expires_at = lease_expires_at
    if commit.session_status is not None:
        state.status = SessionStatus(commit.session_status).value
    if commit.set_pending:
        state.pending = encoded.pending
    if commit.step_id is not None and encoded.step_value is not None:
        step = step_row(state.key, commit.turn_id, commit.step_id, encoded.step_value)
        state.steps[commit.step_id] = {**step, "id": ids.next("steps")}
    for row in message_rows(state.key, encoded.messages):
        state.messages[row["idx"]] = row
    for row in encoded.confirmations:
        state.confirmations[row["confirmation_id"]] = {**row, "id": ids.next("confirmations")}
    for row in encoded.facts:
        state.facts[(row["key"], row["version"])] = {**row, "id": ids.next("facts")}
    for row in encoded.timers:
        state.timers[timer_key(row)] = {**row, "id": ids.next("approval_timers")}
    last_seq = state.append_events(encoded.events)
    turn = state.turns.get(commit.turn_id)
    if turn is not None:
        turn.update(turn_changes(commit, encoded, now))
    return last_seq


def _clash(keys: Sequence[Any], existing: dict[Any, Rows]) -> bool:
    """Whether `keys` repeat among themselves or hit an existing row (a unique index's view)."""
    return len(set(keys)) != len(keys) or any(key in existing for key in keys)


# -- reset --------------------------------------------------------------------------------------


def apply_reset(
    state: SessionState,
    reset_id: str,
    new_events: Sequence[EventRow],
    lease_expires_at: float,
    now: float,
) -> tuple[int, int]:
    """Returns the archived generation and the last event seq reserved for `new_events`."""
    reset = state.turns.get(reset_id)
    if reset is None or reset["kind"] != TurnKind.RESET or reset["status"] not in UNFINISHED_VALUES:
        raise StepConflictError(f"no queued reset {reset_id!r} on session {state.key!r}")
    archived = state.generation

    def retire(rows: Sequence[Rows]) -> list[Rows]:
        return [{**row, "generation": archived} for row in rows]

    state.archive[archived] = {
        "messages": retire([state.messages[idx] for idx in sorted(state.messages)]),
        "steps": retire(list(state.steps.values())),
        "events": retire(state.events),
        "facts": retire(sorted(state.facts.values(), key=lambda row: int(row["id"]))),
    }
    state.messages, state.steps, state.events, state.facts = {}, {}, [], {}
    for turn in state.turns.values():
        if turn["status"] == TurnStatus.SUSPENDED:
            turn["status"] = TurnStatus.CANCELLED.value
            turn["cancel_reason"] = CancelReason.RESET.value
            turn["finished_at"] = now
        elif turn["status"] in UNFINISHED_VALUES and turn["id"] > reset["id"]:
            turn["generation"] = archived + 1
    for confirmation in state.confirmations.values():
        if confirmation["status"] == ConfirmationStatus.PENDING.value:
            confirmation["status"] = ConfirmationStatus.EXPIRED.value
            confirmation["resolved_at"] = now
    state.timers = {}  # nothing of the old generation is left to expire
    reset.update(applied_reset(archived, now))
    state.generation = archived + 1
    state.status = SessionStatus.NEW.value
    state.pending = None
    state.lease_expires_at = lease_expires_at
    return archived, state.append_events(new_events)


def read_archive(state: SessionState | None, key: str, generation: int) -> ArchivedGeneration:
    tables = state.archive.get(generation, {}) if state is not None else {}
    return archived_generation(
        key,
        generation,
        messages=tables.get("messages", []),
        steps=tables.get("steps", []),
        events=tables.get("events", []),
        facts=tables.get("facts", []),
    )


def timer_key(row: Rows) -> tuple[str, str, str, str]:
    """A timer's key among its session's: one of each action per request, as the SQL
    `uq_approval_timers_request_action` constraint."""
    return (row["kind"], row["turn_id"], row["request_id"], row.get("action", "expire"))
