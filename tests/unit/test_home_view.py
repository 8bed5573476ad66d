"""The Home tab's view: what Slack takes (blocks, lengths), each request with the same button
value its thread message carries, and an empty inbox that says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.slack.approval_blocks import APPROVE, DENY, ApprovalRef
from bot.slack.home import EMPTY, MAX_LISTED, home_view, ref_of
from bot.testing.blocks import view_problem


@dataclass(frozen=True)
class Item:
    kind: str
    session: str
    turn_id: str
    request_id: str
    prompt: str
    asked_by: str | None
    created_at: float | None
    digest: str
    tally: Any = None


@dataclass(frozen=True)
class Turn:
    session: str
    text: str
    created_at: float
    status: str


def item(n: int, kind: str = "input") -> Item:
    return Item(
        kind, f"slack:T1:C1:1.{n}", f"T1:C1:1.{n}", "approve", "Refund?" * 80, "U1", 0.0, "d"
    )


def test_each_request_has_the_thread_buttons_value() -> None:
    view = home_view([item(1), item(2, "confirm")], [], {"slack:T1:C1:1.1": "https://x"}, now=90)
    assert view_problem(view, kind="home") is None
    actions = [b for b in view["blocks"] if b["type"] == "actions"]
    assert [e["action_id"] for e in actions[0]["elements"]] == [APPROVE, DENY]
    assert ApprovalRef.decode(actions[0]["elements"][0]["value"]) == ref_of(item(1))
    assert ref_of(item(1)).digest == "d"
    assert ref_of(item(2, "confirm")).digest == "d"  # a proposed write's binds to it too
    assert "<https://x|open the thread>" in view["blocks"][1]["text"]["text"]
    assert "1 min ago" in view["blocks"][1]["text"]["text"]


def test_an_empty_inbox_says_so_and_a_long_one_stays_within_slacks_limits() -> None:
    empty = home_view([], [], {}, now=0)
    assert any(b.get("text", {}).get("text") == EMPTY for b in empty["blocks"])
    full = home_view(
        [item(n) for n in range(MAX_LISTED + 5)],
        [Turn("slack:T1:C1:1.1", "hi " * 100, 0.0, "completed")] * 10,
        {},
        now=0,
        notice="You can't answer this request",
    )
    assert view_problem(full, kind="home") is None
    assert len([b for b in full["blocks"] if b["type"] == "actions"]) == MAX_LISTED
