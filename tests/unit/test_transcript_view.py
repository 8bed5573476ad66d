"""`TranscriptView` is what a model step sees: a stable prefix, whatever is appended later."""

from __future__ import annotations

import pytest

from agent import Message, UserMessage
from agent._messages import TranscriptView


def _messages(n: int) -> list[Message]:
    return [UserMessage(turn_id="t", text=str(i)) for i in range(n)]


def test_view_is_a_snapshot_of_the_prefix() -> None:
    items = _messages(3)
    view = TranscriptView(items)
    items.append(UserMessage(turn_id="t", text="later"))
    assert len(view) == 3
    assert [m.text for m in view] == ["0", "1", "2"]
    assert [m.text for m in reversed(view)] == ["2", "1", "0"]
    assert view[-1].text == "2"
    assert [m.text for m in view[1:]] == ["1", "2"]
    with pytest.raises(IndexError):
        view[3]
    assert list(view) == items[:3]
