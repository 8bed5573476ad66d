"""`Quorum` answerers: their stored shape (part of a request's digest), what they refuse to be,
and how votes add up to an outcome."""

from __future__ import annotations

import pydantic
import pytest

from agent import Quorum, QuorumAnswerer, Tally
from agent._hitl_answerers import answerers_from_json, answerers_json, parse_answerer
from agent._hitl_checks import request_digest
from agent._hitl_quorum import tally
from agent.seams import TimerKind, VoteRecord


def _votes(*cast: tuple[str, bool]) -> list[VoteRecord]:
    return [
        VoteRecord(
            session="s",
            kind=TimerKind.INPUT,
            turn_id="T",
            request_id="r",
            voter=voter,
            approve=approve,
            at=float(n),
        )
        for n, (voter, approve) in enumerate(cast)
    ]


def test_stored_shape_leaves_defaults_out_and_round_trips() -> None:
    users = Quorum(2, users=["U1", "U2", "U3"])
    assert answerers_json(users) == {"quorum": 2, "users": ["U1", "U2", "U3"]}
    policy = Quorum(2, policy="finance", deny="majority")
    assert answerers_json(policy) == {"quorum": 2, "policy": "finance", "deny": "majority"}
    scoped = Quorum(1, policy="finance", scope="emea")
    assert answerers_json(scoped) == {"quorum": 1, "policy": "finance", "scope": "emea"}
    for answerer in (users, policy, scoped):
        assert answerers_from_json(answerer.model_dump_json()) == answerer
    # A stored quorum with a policy is a quorum, not a plain policy answerer.
    assert isinstance(parse_answerer({"quorum": 2, "policy": "p"}), QuorumAnswerer)


def test_the_digest_depends_on_the_quorum() -> None:
    two = request_digest("T", "r", "ok?", None, Quorum(2, users=["U1", "U2"]))
    one = request_digest("T", "r", "ok?", None, Quorum(1, users=["U1", "U2"]))
    assert two != one


@pytest.mark.parametrize(
    "fields",
    [
        {"quorum": 3, "users": ["U1", "U2"]},  # unreachable
        {"quorum": 2, "users": ["U1", "U1"]},  # one person twice
        {"quorum": 1, "users": ["U1"], "policy": "p"},  # both sources
        {"quorum": 1},  # neither
        {"quorum": 0, "users": ["U1"]},
        {"quorum": 1, "users": [""]},
        {"quorum": 1, "users": ["U1"], "scope": "x"},  # a scope without a policy
    ],
)
def test_malformed_quorums_are_refused(fields: dict[str, object]) -> None:
    with pytest.raises(pydantic.ValidationError):
        QuorumAnswerer.model_validate(fields)


def test_tally_approves_at_the_quorum_and_denies_at_the_first_no() -> None:
    quorum = Quorum(2, users=["A", "B", "C"])
    assert tally(quorum, _votes(("A", True))).outcome is None
    assert tally(quorum, _votes(("A", True), ("B", True))).outcome == "approved"
    denied = tally(quorum, _votes(("A", True), ("C", False)))
    assert (denied.outcome, denied.approved_by, denied.denied_by) == ("denied", ("A",), ("C",))


def test_tally_with_deny_majority() -> None:
    users = Quorum(2, users=["A", "B", "C", "D"], deny="majority")
    assert tally(users, _votes(("A", False))).outcome is None
    assert tally(users, _votes(("A", False), ("B", False))).outcome is None  # 2 of 4: no
    # Three of four denied: more than half, and two approvals can no longer be reached.
    assert tally(users, _votes(("A", False), ("B", False), ("C", False))).outcome == "denied"
    unreachable = Quorum(3, users=["A", "B", "C", "D"], deny="majority")
    assert tally(unreachable, _votes(("A", False), ("B", False))).outcome == "denied"
    policy = Quorum(2, policy="p", deny="majority")
    assert tally(policy, _votes(("A", False))).outcome is None
    assert tally(policy, _votes(("A", False), ("B", False))).outcome == "denied"


def test_progress_says_who_approved() -> None:
    said = Tally(need=2, approved_by=("A",), denied_by=(), outcome=None).progress()
    assert said == "1 of 2 approvals: approved by A"
