"""The store seam: `SessionStore`, everything the engine persists goes through it, composed of
one Protocol per role (each with its own contract suite under tests/contract/), and
`StoreHandle`, what a local tool gets to write in the step's transaction.

A store implements the whole `SessionStore`; code that needs one role takes that role's
Protocol, so what it may touch is in its signature and a test double needs only that much."""

from __future__ import annotations

from typing import Protocol

from agent._followup_seam import FollowUps
from agent._grant_seam import GrantRecord, Grants, GrantScope
from agent._ledger_seam import Ledgers, Retention
from agent._queue_seam import Approvals, TurnQueue
from agent._step_seam import StepLog, StoreHandle
from agent._vote_seam import VoteRecord, Votes

__all__ = [
    "Approvals",
    "FollowUps",
    "GrantRecord",
    "GrantScope",
    "Grants",
    "Ledgers",
    "Retention",
    "SessionStore",
    "StepLog",
    "StoreHandle",
    "TurnQueue",
    "VoteRecord",
    "Votes",
]


class SessionStore(
    TurnQueue, StepLog, Approvals, Votes, FollowUps, Grants, Ledgers, Retention, Protocol
):
    """Every role of the store in one: what a store implements and the engine holds."""

    async def close(self) -> None:
        """Release connections."""
        ...
