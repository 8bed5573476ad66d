"""A session's durable events as server-sent events, for the console's live timeline.

The HTTP turn API's machinery, reused whole: a `bot.api.feed.Feed` (the durable log after the
reader's cursor, then the runtime's hub live, with the log read again every `poll` seconds, so
a turn run by another process shows too) written by `bot.api.sse.stream` (`id: <seq>`, so a
reconnecting `EventSource` sends `Last-Event-ID` and gets exactly what followed; `: ping` when
idle; a last `event: closing` frame when the server stops). Only durable events are sent (no
live deltas: the console shows steps, not typing), each as a one-line summary, scrubbed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from agent import TurnEvent
from bot.api.feed import Feed
from bot.api.sse import stream
from bot.console.service import ConsoleService
from bot.console.views import event_summary


def event_frames(service: ConsoleService, key: str, after: int) -> AsyncIterator[str]:
    """The frames of session `key` after seq `after`, until the client leaves or the server
    stops."""

    def to_json(event: TurnEvent) -> dict[str, Any]:
        body = event.model_dump(mode="json")
        return {
            "seq": event.seq,
            "type": event.type,
            "turn_id": event.turn_id,
            "summary": event_summary(event.type, body, service.scrub),
        }

    feed = Feed(service.runtime.session(service.agent, key), after=after)
    return stream(
        feed,
        to_json=to_json,
        heartbeat=service.heartbeat,
        poll=service.poll,
        open_=lambda: service.open,
        wanted=lambda event: bool(event.seq),
    )
