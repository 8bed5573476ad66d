"""The relayed live events' wire format (`storage.redis.live_wire`): any text survives, every
message is bounded, garbage is refused, and a receiver never shows a step with a hole in it."""

from __future__ import annotations

import json

import pytest

from agent import (
    ActionCompleted,
    ActionRequested,
    MessageCompleted,
    MessageDelta,
    ProgressUpdated,
    ToolCall,
    TurnCompleted,
    TurnEvent,
    TurnStarted,
)
from storage.redis.live_wire import (
    Continuity,
    MalformedMessage,
    Reference,
    Sequencer,
    decode,
    encode,
)

AWKWARD = 'a\ud800b\x00"\\\n\u2028é😀\u202e' + "</script>"


def roundtrip(event: TurnEvent, **kw: int) -> list[TurnEvent | Reference]:
    return [decode(data).event for data in encode(event, origin="o1", sent_at=1.5, **kw)]


@pytest.mark.parametrize(
    "event",
    [
        MessageDelta(session=AWKWARD, turn_id="t", text=AWKWARD, after=3),
        MessageDelta(session="s", turn_id="t", text="", restart=True, after=1),
        ProgressUpdated(session="s", turn_id="t", index=3, text=AWKWARD, after=2),
        TurnStarted(session="s", turn_id=AWKWARD, seq=1, text=AWKWARD, source="slack"),
        MessageCompleted(session="s", turn_id="t", seq=2, index=1, text=AWKWARD),
        ActionRequested(session="s", turn_id="t", seq=3, call=ToolCall(id="c", name="n", input={})),
        ActionCompleted(session="s", turn_id="t", seq=4, call_id="c", name="n", result={"k": [1]}),
        TurnCompleted(session="s", turn_id="t", seq=5, text=AWKWARD),
    ],
)
def test_every_event_survives_the_trip_whatever_its_text(event: TurnEvent) -> None:
    [data] = encode(event, origin="o1", sent_at=1.5, offset=7)
    assert data.isascii()
    received = decode(data)
    assert (received.origin, received.sent_at, received.offset) == ("o1", 1.5, 7)
    assert received.event == event


def test_a_delta_over_the_bound_goes_as_consecutive_pieces() -> None:
    text = "".join(chr(0x1F600 + i % 50) + "x\x01" for i in range(20_000))
    delta = MessageDelta(session="s", turn_id="t", text=text, after=4)
    messages = encode(delta, origin="o", sent_at=0.0, offset=100, max_bytes=4096)
    assert len(messages) > 10
    assert all(len(m) <= 4096 for m in messages)
    pieces = [decode(m) for m in messages]
    assert "".join(p.event.text for p in pieces if isinstance(p.event, MessageDelta)) == text
    offsets = [p.offset for p in pieces]
    lengths = [len(p.event.text) for p in pieces if isinstance(p.event, MessageDelta)]
    assert offsets == [100 + sum(lengths[:i]) for i in range(len(pieces))]


def test_a_durable_event_over_the_bound_goes_by_reference() -> None:
    event = TurnCompleted(session="s", turn_id="t", seq=9, text="x" * 10_000)
    [data] = encode(event, origin="o", sent_at=0.0, max_bytes=1024)
    assert len(data) <= 1024
    assert decode(data).event == Reference(session="s", turn_id="t", seq=9, type="turn.completed")


def test_what_cannot_fit_at_all_is_not_sent() -> None:
    event = MessageDelta(session="s" * 5000, turn_id="t", text="hello", after=1)
    assert encode(event, origin="o", sent_at=0.0, max_bytes=1024) == []


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"v": 2, "o": "x", "t": 1, "e": {}}',
        b'{"v": 1, "o": 5, "t": 1, "e": {}}',
        b'{"v": 1, "o": "x", "t": "soon", "e": {}}',
        b'{"v": 1, "o": "x", "t": NaN, "e": {}}',
        b'{"v": 1, "o": "x", "t": 1, "n": -1, "e": {}}',
        b'{"v": 1, "o": "x", "t": 1, "e": {"type": "turn.exploded", "session": "s"}}',
        b'{"v": 1, "o": "x", "t": 1, "e": {"type": "message.delta", "session": "s"}}',
        b'{"v": 1, "o": "x", "t": 1}',
        b'{"v": 1, "o": "x", "t": 1, "r": {"session": "s", "turn_id": "t", "seq": 0}}',
        json.dumps({"v": 1, "o": "x", "t": 1, "e": {"type": "message.delta"} | {"x": 1}}).encode(),
    ],
)
def test_anything_else_is_refused(data: bytes) -> None:
    with pytest.raises(MalformedMessage):
        decode(data)


def test_the_sender_stamps_what_a_delta_follows_and_where_it_starts() -> None:
    sequencer = Sequencer()
    started = TurnStarted(session="s", turn_id="t1", seq=4, text="hi")
    assert sequencer.stamp(started) == (started, 0)
    first, at_first = sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="abc"))
    _, at_second = sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="de"))
    assert (first.after, at_first, at_second) == (4, 0, 3)
    sequencer.stamp(MessageCompleted(session="s", turn_id="t1", seq=5, index=1, text="abcde"))
    third, at_third = sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="f"))
    assert (third.after, at_third) == (5, 0), "a new step starts at 0"
    sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="", restart=True))
    _, after_restart = sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="g"))
    assert after_restart == 0
    unknown, _ = sequencer.stamp(MessageDelta(session="other", turn_id="t", text="x"))
    assert unknown.after == 0, "no durable event of that session was emitted here"


def test_progress_is_placed_like_a_delta_and_moves_no_step_offset() -> None:
    """Progress is no part of the step's text: a delta after it continues where the last
    delta ended, and the progress itself says which durable event it follows."""
    sequencer = Sequencer()
    sequencer.stamp(TurnStarted(session="s", turn_id="t1", seq=4, text="hi"))
    sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="abc"))
    progress, at = sequencer.stamp(
        ProgressUpdated(session="s", turn_id="t1", index=1, text="Checking the order.")
    )
    _, next_delta = sequencer.stamp(MessageDelta(session="s", turn_id="t1", text="de"))
    assert (progress.after, at, next_delta) == (4, 0, 3)


def test_progress_over_the_bound_is_dropped_not_referenced() -> None:
    """It has no log entry to be read from; the next one carries the whole progress again."""
    big = ProgressUpdated(session="s", turn_id="t", index=1, text="x" * 5000, after=2)
    assert encode(big, origin="o", sent_at=0.0, max_bytes=1024) == []


def delta(text: str, turn: str = "t1", after: int = 4, **kw: bool) -> MessageDelta:
    return MessageDelta(session="s", turn_id=turn, text=text, after=after, **kw)


def test_a_receiver_shows_no_step_with_a_hole_in_it() -> None:
    seen = Continuity()
    assert seen.admit("A", delta("abc"), 0)
    assert seen.admit("A", delta("de"), 3)
    assert not seen.admit("A", delta("g"), 6), "the delta at 5 was lost"
    assert not seen.admit("A", delta("h"), 7), "nor anything after the hole"
    assert seen.admit("A", delta("x", after=5), 0), "the next step starts clean"
    assert seen.admit("A", delta("", restart=True), 0)
    assert seen.admit("A", delta("y"), 0)


def test_a_receiver_that_joins_mid_step_waits_for_the_next_one() -> None:
    seen = Continuity()
    assert not seen.admit("A", delta("late"), 12)
    assert not seen.admit("A", delta("text", after=0), 0), "placed after nothing known"
    assert seen.admit("A", delta("next", turn="t2", after=9), 0)


def test_each_sending_process_is_followed_on_its_own() -> None:
    seen = Continuity()
    assert seen.admit("A", delta("abc"), 0)
    assert seen.admit("B", delta("xy"), 0)
    assert seen.admit("A", delta("d"), 3)
    seen.forget("s")
    assert not seen.admit("A", delta("e"), 4)
