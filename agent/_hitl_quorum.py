"""When several people must approve (`Quorum` answerers): how their votes add up, and what the
model and a person read of them.

Votes are stored one by one as they are cast (`Votes.cast_vote`); the request resolves the
moment the tally decides it, through the answer path every request takes:
- approved once `quorum` different people approved;
- denied at the first Deny (`deny="first"`, the default: one "no" from someone entitled to
  answer is enough to stop a refund), or with `deny="majority"` once more than half of `users`
  denied, or once so many denied that the quorum can no longer be reached. For a policy quorum,
  whose voters are not known in advance, "majority" means as many denials as approvals needed.

A leaf module (answerers, records and events only), so every surface can show the same
progress.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agent._errors import ResumeValidationError
from agent._events import ApprovalVoted
from agent._hitl_answerers import QuorumAnswerer
from agent._messages import JsonValue
from agent._records import TimerKind
from agent._vote_seam import VoteRecord

NOT_A_VOTE = "a request that needs several approvals takes true (approve) or false (deny)"


@dataclass(frozen=True, kw_only=True)
class Tally:
    """Where a quorum request stands after a vote: who approved and denied (in the order they
    voted), how many approvals it needs, and the outcome once decided."""

    need: int
    approved_by: tuple[str, ...]
    denied_by: tuple[str, ...]
    outcome: Literal["approved", "denied"] | None
    """None: still waiting for votes."""
    counted: bool = True
    """False when the voter had voted already: their first vote stands, this one changed
    nothing."""

    @property
    def decided(self) -> bool:
        return self.outcome is not None

    def progress(self) -> str:
        """ "1 of 2 approvals: approved by U1", in ids (a surface renders them as people)."""
        said = f"{len(self.approved_by)} of {self.need} approvals"
        if self.approved_by:
            said += f": approved by {', '.join(self.approved_by)}"
        if self.denied_by:
            said += f"; denied by {', '.join(self.denied_by)}"
        return said


@dataclass(frozen=True, kw_only=True)
class VoteTarget:
    """The request a vote is on: a park's input (`TimerKind.INPUT`) or a proposed write."""

    kind: TimerKind
    turn_id: str
    request_id: str


@dataclass(frozen=True, kw_only=True)
class Ballot:
    """One person's vote as it is about to be cast (`counted`: a retry of a vote already
    stored, so reading it back is not a repeat)."""

    approve: bool
    voter: str
    reason: str | None
    counted: bool = False

    def record(self, session: str, where: VoteTarget, at: float) -> VoteRecord:
        return VoteRecord(
            session=session,
            kind=where.kind,
            turn_id=where.turn_id,
            request_id=where.request_id,
            voter=self.voter,
            approve=self.approve,
            at=at,
            reason=self.reason,
        )

    def event(self, session: str, where: VoteTarget) -> ApprovalVoted:
        return ApprovalVoted(
            session=session,
            turn_id=where.turn_id,
            kind="input" if where.kind == TimerKind.INPUT else "confirmation",
            request_id=where.request_id,
            by=self.voter,
            approve=self.approve,
            reason=self.reason,
        )


def tally(quorum: QuorumAnswerer, votes: Sequence[VoteRecord], *, counted: bool = True) -> Tally:
    """The standing of a quorum request given every vote on it (one per person, as stored)."""
    approved = tuple(vote.voter for vote in votes if vote.approve)
    denied = tuple(vote.voter for vote in votes if not vote.approve)
    outcome: Literal["approved", "denied"] | None = None
    if len(approved) >= quorum.quorum:
        outcome = "approved"
    elif denied and _denial_decides(quorum, len(denied)):
        outcome = "denied"
    return Tally(
        need=quorum.quorum, approved_by=approved, denied_by=denied, outcome=outcome, counted=counted
    )


def _denial_decides(quorum: QuorumAnswerer, denials: int) -> bool:
    if quorum.deny == "first":
        return True
    if quorum.users is None:
        return denials >= quorum.quorum
    voters = len(quorum.users)
    return denials * 2 > voters or voters - denials < quorum.quorum


def vote_of(value: JsonValue) -> bool:
    """A quorum request's answer is a yes or a no; anything else is refused, changing nothing."""
    if not isinstance(value, bool):
        raise ResumeValidationError(NOT_A_VOTE)
    return value


def quorum_note(decided: Tally, by: str | None, reason: str | None) -> dict[str, JsonValue]:
    """The park's note step for a quorum's outcome: who approved and denied, and what the
    deciding voter said."""
    note: dict[str, JsonValue] = {
        "outcome": "answered",
        "by": by,
        "approved_by": list(decided.approved_by),
        "denied_by": list(decided.denied_by),
        "need": decided.need,
    }
    if reason:
        note["reason"] = reason
    return note


def quorum_text(input_id: str, note: Mapping[str, JsonValue]) -> str:
    """What the model reads of a quorum's outcome, beside the answer itself."""
    approved = _names(note.get("approved_by"))
    denied = _names(note.get("denied_by"))
    need = note.get("need")
    if denied and len(approved) < int(need if isinstance(need, int) else 0):
        text = f"The request {input_id!r} was denied by {', '.join(denied)}"
        if approved:
            text += f" (approved by {', '.join(approved)})"
    else:
        text = f"The request {input_id!r} was approved by {', '.join(approved)} ({need} needed)"
    if note.get("reason"):
        text += f"; {note.get('by') or 'the deciding voter'} said: {note.get('reason')}"
    return text + "."


def _names(value: JsonValue) -> list[str]:
    return [str(name) for name in value] if isinstance(value, list) else []
