"""What one reply message shows, apart from how it reaches Slack: its words, its tool calls'
task cards and its last words, as saved with the delivery cursor and as posted or edited.

A reply's tool calls are task cards however the message is shown: `task_update` chunks while
it streams (`bot.slack.rendering.parts`), and `task_card` blocks
(https://docs.slack.dev/reference/block-kit/blocks/task-card-block) below a `markdown` block
where it is posted or edited (`message_body`). So a reply Slack stopped streaming (a Stop, an
expiry) and taken on by edits, one put back after a crash, or one rewritten later when the
request it waited on ended, keeps its cards instead of turning into a list of text lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.models.messages.chunk import TaskUpdateChunk

from storage.delivery.bodies import PostBody

TASK_MARKS = {"complete": "✓", "error": "✗", "in_progress": "…", "pending": "·"}
STATUS_TASK = "status"
MAX_TEXT = 11_000  # Slack takes about 12,000 characters per markdown_text / text
MAX_OUTPUT = 200
CHUNK_FIELDS = ("id", "title", "status", "details", "output")
"""What a task entry sends as a `task_update` chunk; its other keys are the renderer's notes
(`waits`: the request it waits on; `verdict`: how that request ended; `cut`: returned after
the turn was asked to stop; `progress`: the model's progress, no tool call)."""
MAX_CARDS = 45
"""Task cards in one posted message: Slack takes 50 blocks, and the text, the footer and the
feedback buttons take a block each."""
MENTION = re.compile(r"<@([A-Z0-9]+)>")


@dataclass
class PartContent:
    shown: str = ""
    durable: int = 0
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    footer: str = ""
    """The message's last words, below its tool calls (set when it closes)."""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    """Blocks it closed with below everything (an answer's feedback buttons)."""

    def body(self) -> PostBody:
        """What the message's row keeps: its words as far as they are durable, every card."""
        return PostBody(
            text=self.shown[: self.durable],
            tasks=list(self.tasks.values()),
            footer=self.footer or None,
            blocks=self.blocks or None,
        )

    @classmethod
    def from_body(cls, body: PostBody) -> PartContent:
        text = body.text or ""
        tasks = {str(t["id"]): dict(t) for t in body.tasks or [] if "id" in t}
        return cls(
            shown=text,
            durable=len(text),
            tasks=tasks,
            footer=body.footer or "",
            blocks=list(body.blocks or []),
        )


def chunk_for(task: dict[str, Any]) -> TaskUpdateChunk:
    return TaskUpdateChunk(**{k: task[k] for k in CHUNK_FIELDS if task.get(k)})


def rich_text(text: str) -> dict[str, Any]:
    """Plain text as a `rich_text` object (what a task card's `output` takes), its `<@U…>`
    mentions as user elements."""
    elements: list[dict[str, Any]] = []
    at = 0
    for found in MENTION.finditer(text):
        if found.start() > at:
            elements.append({"type": "text", "text": text[at : found.start()]})
        elements.append({"type": "user", "user_id": found.group(1)})
        at = found.end()
    if at < len(text):
        elements.append({"type": "text", "text": text[at:]})
    return {"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": elements}]}


def task_card(task: dict[str, Any]) -> dict[str, Any]:
    card: dict[str, Any] = {
        "type": "task_card",
        "task_id": str(task["id"]),
        "title": str(task.get("title") or task["id"]),
        "status": task.get("status", "pending"),
    }
    for name in ("details", "output"):
        if task.get(name):
            card[name] = rich_text(str(task[name]))
    return card


def message_body(content: PartContent, footer: str | None = None) -> dict[str, Any]:
    """The arguments of a `chat.postMessage` / `chat.update` that show the part: its text in
    standard Markdown and, if it ran tools, their task cards below it (then the footer, then
    the blocks it closed with). `text` is then the notification text: the words, no list."""
    footer = footer if footer is not None else content.footer
    tasks = [t for t in content.tasks.values() if t.get("id") != STATUS_TASK]
    if not tasks and not content.blocks:
        return {"markdown_text": render_text(content.shown, [], footer)}
    blocks: list[dict[str, Any]] = []
    words = content.shown.strip()[:MAX_TEXT]
    if words:
        blocks.append({"type": "markdown", "text": words})
    blocks.extend(task_card(t) for t in tasks[:MAX_CARDS])
    if len(tasks) > MAX_CARDS:
        blocks.append({"type": "markdown", "text": f"_…and {len(tasks) - MAX_CARDS} more steps._"})
    if footer:
        blocks.append({"type": "markdown", "text": footer})
    blocks.extend(content.blocks)
    return {"text": render_text(content.shown, [], footer), "blocks": blocks}


def render_text(text: str, tasks: list[dict[str, Any]], footer: str | None = None) -> str:
    """A part as plain message text: what `chat.update` shows where there is no stream."""
    lines = [text.strip()] if text.strip() else []
    steps = [
        f"{TASK_MARKS.get(t.get('status', ''), '·')} {t.get('title', '')}"
        + (f" — {t['output']}" if t.get("output") and t.get("status") == "error" else "")
        for t in tasks
        if t.get("id") != STATUS_TASK
    ]
    if steps:
        lines.append("\n".join(steps))
    if footer:
        lines.append(footer)
    return ("\n\n".join(lines) or "…")[:MAX_TEXT]
