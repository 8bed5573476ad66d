"""The reply's progress cards (`bot.slack.rendering.progress`): one line, replaced as it grows
without a chunk per word, settled rather than reported as a call that never ran, and never
counted as one of the turn's tool calls."""

from __future__ import annotations

from typing import Any, cast

from slack_sdk.models.messages.chunk import TaskUpdateChunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.rendering.outcomes import NOTHING_TO_ADD, summary
from bot.slack.rendering.parts import ReplyPart, Target
from bot.slack.rendering.progress import MAX_LINE, progress_line, settle_progress, show_progress


def part() -> ReplyPart:
    client = cast("AsyncWebClient", object())  # no Slack call is made here
    return ReplyPart(client, Target(team="T", channel="C", thread_ts="1.0"), "post-1")


def test_the_card_shows_the_newest_line_cut_short() -> None:
    assert progress_line("Reading the question.\n\n  Looking   up\torder 42. ") == (
        "Looking up order 42."
    )
    assert progress_line(" \n ") is None
    long = progress_line("x" * 500)
    assert long is not None
    assert len(long) == MAX_LINE
    assert long.endswith("…")


def test_progress_replaces_its_unsent_state_instead_of_queueing_a_chunk_per_word() -> None:
    shown = part()
    for text in ("Looking", "Looking up", "Looking up order 42."):
        show_progress(shown, 1, text)

    [chunk] = shown.pending
    assert isinstance(chunk, TaskUpdateChunk)
    assert (chunk.id, chunk.status, chunk.details) == (
        "progress:1",
        "in_progress",
        "Looking up order 42.",
    )
    show_progress(shown, 1, "Looking up order 42.")
    assert len(shown.pending) == 1, "an unchanged line sends nothing"


def test_a_settled_card_keeps_its_line_and_ignores_a_late_update() -> None:
    shown = part()
    show_progress(shown, 1, "Looking up order 42.")
    shown.task("tu_1", "Lookup order", "in_progress")
    show_progress(shown, 3, "Writing the answer.")

    settle_progress(shown, 1)
    show_progress(shown, 1, "Looking up order 43.")  # stale: its step committed

    tasks: dict[str, Any] = shown.content.tasks
    assert tasks["progress:1"]["status"] == "complete"
    assert tasks["progress:1"]["details"] == "Looking up order 42."
    assert tasks["progress:3"]["status"] == "in_progress"
    shown.end_unfinished_tasks("the turn failed")
    assert tasks["progress:3"]["status"] == "in_progress", "progress is no call that never ran"
    assert tasks["tu_1"]["status"] == "error"
    settle_progress(shown)
    assert tasks["progress:3"]["status"] == "complete"


def test_progress_is_not_counted_as_a_tool_call() -> None:
    shown = part()
    show_progress(shown, 1, "Thinking it over.")
    assert summary(shown.content.tasks.values()) == NOTHING_TO_ADD
