"""What `RedisEventRelay` sends between processes, and the bookkeeping that keeps a relayed
step's live text a prefix of what the turn typed.

One message is one JSON object, ASCII only (other characters as `\\uXXXX` escapes, so any
text survives the trip, lone surrogates and NULs included):

    {"v": 1, "o": "<origin>", "t": <wall time sent>, "e": {<the event>}, "n": <offset>}

- `o`: the sending relay, so a process drops its own events when they come back.
- `t`: `time.time()` at publication, for measuring the latency.
- `e`: the event as its pydantic model dumps it (`agent._events`) and is validated by on receipt;
  durable events carry their `seq`, and a delta its `after`: the newest durable seq the sending
  process emitted for the session before it.
- `n` (deltas): the characters of live text the turn emitted in this step before this delta.
  A `progress.updated` carries its `after` too, and no offset: each one is the whole progress
  so far, so one lost leaves no hole and any that arrives is shown (never sent by reference).
- `r` instead of `e`: a durable event larger than `max_bytes` as a reference
  (`session`, `turn_id`, `seq`, `type`); the receiver reads it from the durable log.

A delta larger than `max_bytes` is sent as several consecutive deltas (same text, in order).

Pub/sub is at-most-once, so a receiver may miss a delta. Showing the step's later deltas would
then leave a hole that the step's durable text cannot repair (Slack cannot take back streamed
text), so a receiver shows a delta only if it starts a step (`n == 0`) or continues exactly where
the last one it showed of that turn ended (`Continuity`); after a loss the rest of the step
appears with its commit.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, TypeGuard

from pydantic import TypeAdapter

from agent.seams import MessageDelta, ProgressUpdated, TurnEvent

VERSION = 1
MAX_BYTES = 64 * 1024
"""Default bound of one message: a delta is split below it, a durable event sent by reference."""

_events: TypeAdapter[TurnEvent] = TypeAdapter(TurnEvent)


class MalformedMessage(ValueError):
    """A message that is not this format (another version, a stray publisher, garbage)."""


@dataclass(frozen=True, kw_only=True)
class Reference:
    """A durable event too large to send: the receiver reads it from the log."""

    session: str
    turn_id: str
    seq: int
    type: str


@dataclass(frozen=True, kw_only=True)
class Received:
    origin: str
    sent_at: float
    event: TurnEvent | Reference
    offset: int = 0


def _dump(envelope: dict[str, Any]) -> bytes:
    return json.dumps(envelope, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def encode(
    event: TurnEvent, *, origin: str, sent_at: float, offset: int = 0, max_bytes: int = MAX_BYTES
) -> list[bytes]:
    """The messages carrying `event`: one, or for a delta over `max_bytes` several (empty only
    when even a reference or a one-character delta would not fit, e.g. a huge session key)."""
    head: dict[str, Any] = {"v": VERSION, "o": origin, "t": sent_at}
    data = _dump({**head, "e": event.model_dump(mode="json"), "n": offset})
    if len(data) <= max_bytes:
        return [data]
    if isinstance(event, ProgressUpdated):
        return []  # progress is live only, with no log to read it from; the next one replaces it
    if isinstance(event, MessageDelta):
        if len(event.text) < 2:
            return []
        middle = len(event.text) // 2
        first = event.model_copy(update={"text": event.text[:middle]})
        rest = event.model_copy(update={"text": event.text[middle:]})
        halves = ((first, offset), (rest, offset + middle))
        return [
            data
            for half, at in halves
            for data in encode(half, origin=origin, sent_at=sent_at, offset=at, max_bytes=max_bytes)
        ]
    ref = {"session": event.session, "turn_id": event.turn_id, "seq": event.seq, "type": event.type}
    data = _dump({**head, "r": ref})
    return [data] if len(data) <= max_bytes else []


def decode(data: bytes | str) -> Received:
    """The message as sent; `MalformedMessage` for anything else."""
    try:
        obj = json.loads(data)
        if not isinstance(obj, dict) or obj.get("v") != VERSION:
            raise MalformedMessage("not a version 1 live event")
        origin, sent_at, offset = obj.get("o"), obj.get("t"), obj.get("n", 0)
        if not isinstance(origin, str) or not _number(sent_at) or not _count(offset):
            raise MalformedMessage("bad envelope fields")
        if "e" in obj:
            event: TurnEvent | Reference = _events.validate_python(obj["e"])
        else:
            ref = obj.get("r")
            if not isinstance(ref, dict):
                raise MalformedMessage("neither an event nor a reference")
            event = Reference(
                session=_text(ref, "session"),
                turn_id=_text(ref, "turn_id"),
                seq=_seq(ref),
                type=_text(ref, "type"),
            )
    except MalformedMessage:
        raise
    except (ValueError, TypeError, UnicodeDecodeError) as err:  # pydantic's errors are ValueErrors
        raise MalformedMessage(type(err).__name__) from None
    return Received(origin=origin, sent_at=float(sent_at), event=event, offset=offset)


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(obj: dict[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise MalformedMessage(f"reference without {key}")
    return value


def _seq(obj: dict[str, Any]) -> int:
    value = obj.get("seq")
    if not _count(value) or value == 0:
        raise MalformedMessage("reference without a seq")
    return value


class Sequencer:
    """The sending side: per session, the newest durable seq emitted here and the live text of
    the current step, to stamp on each delta. Bounded (least recently used sessions go first;
    a session forgotten mid-step only has its deltas dropped by receivers until its next
    durable event)."""

    def __init__(self, limit: int = 10_000) -> None:
        self._limit = limit
        self._sessions: OrderedDict[str, list[Any]] = OrderedDict()
        """session -> [newest durable seq, turn id, live characters of the step]"""

    def stamp(self, event: TurnEvent) -> tuple[TurnEvent, int]:
        """The event as it is sent (a delta with `after`), and its offset in its step."""
        state = self._sessions.get(event.session)
        if state is None:
            state = self._sessions[event.session] = [0, event.turn_id, 0]
            while len(self._sessions) > self._limit:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(event.session)
        if state[1] != event.turn_id:
            state[1], state[2] = event.turn_id, 0
        if isinstance(event, ProgressUpdated):
            # Live, and no part of the step's text: placed like a delta, counted in no offset.
            return event.model_copy(update={"after": state[0]}), 0
        if not isinstance(event, MessageDelta):
            # A durable event ends the step (a model step commits its message first).
            state[0], state[2] = max(state[0], event.seq), 0
            return event, 0
        offset = 0 if event.restart else state[2]
        state[2] = offset + len(event.text)
        return event.model_copy(update={"after": state[0]}), offset


class Continuity:
    """The receiving side: where the last delta shown of each session's turn ended, per sending
    process, so a delta after a lost one is not shown (see the module docstring)."""

    def __init__(self) -> None:
        self._ends: dict[str, dict[str, tuple[str, int]]] = {}

    def admit(self, origin: str, delta: MessageDelta, offset: int) -> bool:
        """Whether to show `delta`: its place is known (`after`) and it leaves no hole."""
        if delta.after <= 0:
            return False  # the sender knew no durable event before it: nothing to place it by
        ends = self._ends.setdefault(delta.session, {})
        if delta.restart:
            ends[origin] = (delta.turn_id, 0)
            return True
        if offset != 0 and ends.get(origin) != (delta.turn_id, offset):
            return False
        ends[origin] = (delta.turn_id, offset + len(delta.text))
        return True

    def forget(self, session: str) -> None:
        self._ends.pop(session, None)
