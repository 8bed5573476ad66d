"""How much of a session's transcript a turn is shown: the window of its latest messages, or,
under a model whose API compacts long threads, everything since the newest compaction.

The window (`context_messages`) bounds a thread nothing else bounds. A compacting API bounds it
itself, by tokens, and summarises the start into a compaction block; cutting such a thread by a
message count would forget its start long before the API summarised it (a thread of short
messages reaches 400 messages far below the 150,000-token trigger), and would leave behind a
compaction older than the window. So a compacting session is read from the turn holding its
newest compaction, or from its start, however many messages that is.
"""

from __future__ import annotations

from agent._messages import Message, TriggerMessage, UserMessage, holds_compaction


def recent_end(
    transcript: list[Message], base: int, at_least: int, *, since_compaction: bool
) -> tuple[list[Message], int]:
    """The part of a transcript (starting at index `base`) that `load_transcript_tail` reads
    (with the same `since_compaction`), from the opening of a turn. The drain loads it once;
    without cutting it again before each turn, every turn it ran after the first saw all the
    history since it began."""
    if since_compaction:
        newest = next(
            (i for i in range(len(transcript) - 1, -1, -1) if holds_compaction(transcript[i])),
            None,
        )
        if newest is None:
            return transcript, base
        first = newest
    else:
        first = len(transcript) - max(at_least, 1)
    for position in range(first, 0, -1):
        if isinstance(transcript[position], UserMessage | TriggerMessage):
            return transcript[position:], base + position
    return transcript, base
