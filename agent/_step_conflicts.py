"""A step the store refused because a row with its identity exists (`StepConflictError`).

Two kinds, told apart by trying once more on a fresh read:
- one that heals: the worker's view of the session was stale (a concurrent writer got there
  first, a lease moved and came back). Read the transcript and steps again and the turn goes
  on past what is already there; a lease that moved is `LeaseLostError`, its holder goes on;
- one that cannot: the same input makes the same clash on every try (a key built from
  something that repeats, the same key with different content). Retried by the recovery sweep
  it used to loop forever, every later turn of the session queued behind it. It fails the turn
  instead, with a reason a person can read, and the drain goes on to the session's next turn.

The same clash twice in a row means it cannot heal; so does a turn that keeps clashing, each
time elsewhere, `MAX_CONFLICTS` times.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from agent._errors import LeaseLostError, StepConflictError
from agent._turn_env import TurnEnv
from agent._turn_loop import TurnRunner
from agent.seams import TranscriptTail, TurnRecord

log = logging.getLogger("agent._runtime")

MAX_CONFLICTS = 5
UNSAVED = (
    "StepConflictError: the turn stopped because its next step could not be saved: the "
    "session already holds a step with the same identity, and trying again on a fresh read "
    "clashed again, so it would every time. What the turn saved before that step is kept; the "
    "session's next turns run as usual."
)


class StepConflicts:
    """The conflicts one drain met, per turn: whether the next one heals or not."""

    def __init__(self) -> None:
        self._seen: dict[str, list[str]] = {}

    def heals(self, turn_id: str, error: StepConflictError) -> bool:
        seen = self._seen.setdefault(turn_id, [])
        again = bool(seen) and seen[-1] == str(error)
        seen.append(str(error))
        return not again and len(seen) < MAX_CONFLICTS

    async def settle(
        self,
        env: TurnEnv,
        turn: TurnRecord,
        error: StepConflictError,
        context: int,
        since_compaction: bool,
    ) -> TranscriptTail:
        """After `turn` hit `error`: if the lease is still this worker's, read the transcript
        again (returned, for the drain to go on with) and, if the clash cannot heal, fail the
        turn on it. Raises `LeaseLostError` if the lease moved meanwhile."""
        lease = env.lease
        if not await env.store.renew_lease(lease, env.ttl, env.clock()):
            raise LeaseLostError(
                f"lease on session {lease.session!r} (epoch {lease.epoch}) was taken over"
            ) from error
        heals = self.heals(turn.turn_id, error)
        tail: TranscriptTail = await env.store.load_transcript_tail(
            lease.session, context, since_compaction=since_compaction
        )
        if heals:
            log.info("a step of %s clashed (%s); going on from a fresh read", turn.turn_id, error)
            return tail
        log.warning("failing turn %s: %s, on every try", turn.turn_id, error)
        # The clash ended the run's watch as interrupted (a turn that goes on); this one ends
        # the turn, so it is a run of its own that the meter and the trace hear of as failed.
        watch = env.watch.renewed()
        failing = replace(env, watch=watch)
        with watch.running():
            watch.run_ended(await TurnRunner(failing, turn, tail.messages, tail.base).fail(UNSAVED))
        self._seen.pop(turn.turn_id, None)
        return tail
