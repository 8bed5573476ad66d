"""Retention on `MemoryStore`'s rows: what `storage.sql.prune` does, on dicts.

Each call runs under the store's lock, so the liveness check and the removal are atomic with
respect to every other store call, as the SQL write's row locks make them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from agent.seams import ConfirmationStatus, PruneCounts, SessionStatus, TurnKind
from storage.ledger_records import SETTLED_RECEIPTS
from storage.memory.state import Rows, SessionState
from storage.records import FINISHED_VALUES, OPEN_VALUES, reset_archived


def candidates(
    states: Iterable[SessionState], before: float, after: int, limit: int
) -> list[tuple[SessionState, Rows]]:
    picked = [
        (state, turn)
        for state in states
        for turn in state.turns.values()
        if turn.get("pruned_at") is None
        and int(turn["id"]) > after
        and turn.get("finished_at") is not None
        and float(turn["finished_at"]) < before
    ]
    picked.sort(key=lambda pair: int(pair[1]["id"]))
    return picked[:limit]


def is_live(state: SessionState) -> bool:
    """A turn queued, running or suspended, a park's checkpoint, or a pending confirmation."""
    return (
        state.status == SessionStatus.SUSPENDED.value
        or state.pending is not None
        or any(turn["status"] in OPEN_VALUES for turn in state.turns.values())
        or any(
            row["status"] == ConfirmationStatus.PENDING.value
            for row in state.confirmations.values()
        )
    )


def prune_turns(
    picked: Sequence[tuple[SessionState, Rows]],
    horizons: Mapping[str, int],
    dry_run: bool,
    now: float,
) -> PruneCounts:
    counts = PruneCounts()
    by_session: dict[str, tuple[SessionState, list[Rows]]] = {}
    for state, turn in picked:
        by_session.setdefault(state.key, (state, []))[1].append(turn)
    for state, turns in by_session.values():
        if is_live(state):
            counts += PruneCounts(held=len(turns))
            continue
        counts += _prune_session(state, turns, horizons.get(state.key), dry_run, now)
    return counts


def _prune_session(
    state: SessionState, turns: list[Rows], horizon: int | None, dry_run: bool, now: float
) -> PruneCounts:
    turn_ids = {turn["turn_id"] for turn in turns if turn["status"] in FINISHED_VALUES}
    undelivered = {
        row["turn_id"]
        for row in state.events
        if row["turn_id"] in turn_ids and horizon is not None and row["seq"] > horizon
    }
    gone_steps = [key for key, row in state.steps.items() if row["turn_id"] in turn_ids]
    gone_events = [
        row
        for row in state.events
        if row["turn_id"] in turn_ids and (horizon is None or row["seq"] <= horizon)
    ]
    generations = archived_rows = 0
    done = [t for t in turns if t["turn_id"] in turn_ids and t["turn_id"] not in undelivered]
    for turn in done:
        if turn["kind"] != TurnKind.RESET.value:
            continue
        generation = reset_archived(turn["result"])
        if generation is None or generation not in state.archive:
            continue
        generations += 1
        archived_rows += sum(len(rows) for rows in state.archive[generation].values())
        if not dry_run:
            del state.archive[generation]
    if not dry_run:
        for key in gone_steps:
            del state.steps[key]
        dropped = {id(row) for row in gone_events}
        state.events = [row for row in state.events if id(row) not in dropped]
        for turn in done:
            turn["pruned_at"] = now
    return PruneCounts(
        turns=len(done),
        steps=len(gone_steps),
        events=len(gone_events),
        generations=generations,
        archived_rows=archived_rows,
        held=len(turn_ids) - len(done),
    )


def receipt_candidates(
    states: Iterable[SessionState], before: float, after: int, limit: int
) -> list[tuple[SessionState, Rows]]:
    picked = [
        (state, row)
        for state in states
        for row in state.receipts.values()
        if row["status"] in SETTLED_RECEIPTS
        and int(row["id"]) > after
        and float(row["updated_at"]) < before
    ]
    picked.sort(key=lambda pair: int(pair[1]["id"]))
    return picked[:limit]


def prune_receipts(picked: Sequence[tuple[SessionState, Rows]], dry_run: bool) -> int:
    removed = 0
    for state, row in picked:
        if is_live(state):
            continue
        removed += 1
        if not dry_run:
            del state.receipts[row["key"]]
    return removed
