"""What a reply shows of the model's progress between its tool calls.

The newest models say what they are doing between tool calls in summarized thinking
(`agent.ProgressUpdated`, live only), not in the reply's words. Each model step that shows
some gets a card of its own in the reply's task timeline, in its place among the tool calls:
"Thinking", with the newest line of that progress as its `details` (one line, cut short),
replaced as more arrives. When the step commits, or the reply ends, the card is settled
(`complete`) with its last line. It is never the reply's text: the final message's words, and
what is stored of them, are the model's alone.
"""

from __future__ import annotations

from bot.slack.rendering.parts import ReplyPart

TITLE = "Thinking"
MAX_LINE = 150
"""Characters of progress a card shows: a line, not the model's whole summary."""


def progress_id(index: int) -> str:
    """The card of the model step that commits as transcript message `index`."""
    return f"progress:{index}"


def progress_line(text: str) -> str | None:
    """The newest non-blank line of `text`, its whitespace collapsed, at most `MAX_LINE`
    characters; None when there is none."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    line = next((line for line in reversed(lines) if line), None)
    if line is None or len(line) <= MAX_LINE:
        return line
    return line[: MAX_LINE - 1] + "…"


def show_progress(part: ReplyPart, index: int, text: str) -> None:
    """The step's card shows `text`'s newest line; nothing changes if it already does, or if
    the card was settled (a late update)."""
    line = progress_line(text)
    if line is None:
        return
    task_id = progress_id(index)
    card = part.content.tasks.get(task_id)
    if card is not None and (card["status"] != "in_progress" or card.get("details") == line):
        return
    part.progress(task_id, TITLE, "in_progress", line)


def settle_progress(part: ReplyPart, index: int | None = None) -> None:
    """The step's card (every one of the part's when `index` is None) stops running."""
    for task_id, card in list(part.content.tasks.items()):
        if not card.get("progress") or card["status"] != "in_progress":
            continue
        if index is None or task_id == progress_id(index):
            part.progress(task_id, card["title"], "complete", str(card.get("details", "")))
