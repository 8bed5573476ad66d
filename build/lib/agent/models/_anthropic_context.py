"""The API's own context management (beta): what a request asks the API to do to a long thread,
and which part of the stored transcript such a request carries.

A long thread used to be cut locally to its newest exchanges, forgetting its start. Where the
model's family takes server-side compaction (`compact_20260112`), the API instead summarises the
thread once its input passes a trigger and answers with a `compaction` block first; the block is
stored in the assistant message like a thinking block, and every later request carries it, read
from it onward by the API. A request therefore starts at the exchange holding the newest
compaction block: what comes before it is what the block summarises, so sending it again would
only cost bytes (and two blocks with content are a 400, `compaction_block_ambiguous`). Because the
request is built from the stored transcript alone, a replay or another worker sends the same
prefix, and the cache still hits. A family without compaction but with tool-result clearing
(`clear_tool_uses_20250919`) gets that edit, and the local window (`bound_transcript`) stays the
fallback. A model id the family table does not know (a gateway's alias) gets neither: the beta
header is a promise an unknown endpoint may refuse.

Docs: https://platform.claude.com/docs/en/build-with-claude/compaction-threshold
      https://platform.claude.com/docs/en/build-with-claude/context-editing
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent._messages import AssistantMessage, CompactionBlock, Message, holds_compaction
from agent.models._anthropic_request import bound_transcript, open_exchanges
from agent.models._families import FAMILIES, family_of

ContextMode = Literal["auto", "off"]
COMPACT_EDIT = "compact_20260112"
CLEAR_TOOL_USES_EDIT = "clear_tool_uses_20250919"
BETA_FOR_EDIT = {
    COMPACT_EDIT: "compact-2026-01-12",
    CLEAR_TOOL_USES_EDIT: "context-management-2025-06-27",
}
"""The `anthropic-beta` header value each edit needs, as its doc page names it."""
MIN_COMPACT_TRIGGER = 50_000
"""The compaction trigger's documented floor (`trigger.value`, input tokens); the API's default
is 150,000."""


@dataclass(frozen=True)
class ContextPlan:
    """What one request asks of the API's context management."""

    edits: tuple[dict[str, Any], ...]
    betas: tuple[str, ...]

    @property
    def compacts(self) -> bool:
        return any(edit["type"] == COMPACT_EDIT for edit in self.edits)

    def param(self) -> dict[str, Any]:
        return {"edits": [dict(edit) for edit in self.edits]}


def context_plan(model: str, mode: ContextMode, compact_at: int | None) -> ContextPlan | None:
    """None: send the plain request (mode off, a model id no family owns, or no edit taken).

    One edit only: compaction where the family takes it (it already bounds the thread, and
    clearing tool results as well would change the prefix it summarised), else tool-result
    clearing at the API's defaults."""
    if mode == "off" or not any(family.owns(model) for family in FAMILIES):
        return None
    takes = family_of(model).context_edits
    if COMPACT_EDIT in takes:
        edit: dict[str, Any] = {"type": COMPACT_EDIT}
        if compact_at is not None:
            edit["trigger"] = {"type": "input_tokens", "value": compact_at}
    elif CLEAR_TOOL_USES_EDIT in takes:
        edit = {"type": CLEAR_TOOL_USES_EDIT}
    else:
        return None
    return ContextPlan(edits=(edit,), betas=(BETA_FOR_EDIT[edit["type"]],))


def compacts(model: str, mode: ContextMode) -> bool:
    """Whether a request for `model` asks the API to compact the thread (`context_plan`'s
    rule, whatever the trigger): the runtime then loads the thread from its newest
    compaction rather than a window of messages."""
    plan = context_plan(model, mode, None)
    return plan is not None and plan.compacts


def check_compact_at(compact_at: int | None) -> None:
    """At start, not at the first long thread: the API refuses a trigger below its floor."""
    if compact_at is not None and compact_at < MIN_COMPACT_TRIGGER:
        raise ValueError(
            f"ANTHROPIC_COMPACT_AT_TOKENS ({compact_at}) must be at least {MIN_COMPACT_TRIGGER:,}"
        )


def context_transcript(messages: Sequence[Message], *, compacts: bool) -> Sequence[Message]:
    """The part of the transcript a request carries.

    Compacting: from the exchange holding the newest compaction block with content, so the
    request still opens with a user's message and tool calls keep their results, with any older
    compaction block in that exchange left out. Not compacting (context management off, or the
    thread moved to a model without it): every compaction block is left out, and the whole
    transcript, still stored, is what the local window bounds."""
    newest = _newest_compaction(messages) if compacts else None
    if newest is None:
        return _without_compactions(messages, keep=None)
    start = 0
    for opening in open_exchanges(messages):
        if opening > newest:
            break
        start = opening
    return _without_compactions(messages[start:], keep=newest - start)


def _newest_compaction(messages: Sequence[Message]) -> int | None:
    for index in range(len(messages) - 1, -1, -1):
        if holds_compaction(messages[index]):
            return index
    return None


def _without_compactions(messages: Sequence[Message], *, keep: int | None) -> Sequence[Message]:
    """`keep`: the index of the one message whose compaction block stays."""
    if not any(_has_compaction(m) for i, m in enumerate(messages) if i != keep):
        return messages
    kept: list[Message] = []
    for index, message in enumerate(messages):
        if index != keep and isinstance(message, AssistantMessage) and _has_compaction(message):
            content = tuple(b for b in message.content if not isinstance(b, CompactionBlock))
            message = message.model_copy(update={"content": content})
        kept.append(message)
    return kept


def _has_compaction(message: Message) -> bool:
    return isinstance(message, AssistantMessage) and any(
        isinstance(b, CompactionBlock) for b in message.content
    )


def request_transcript(
    messages: Sequence[Message], plan: ContextPlan | None, budget: int | None, overhead: int
) -> Sequence[Message]:
    """Compacting, the API bounds the thread and the local window would only cut the prefix
    the compaction block stands for; otherwise the local window bounds it (`budget` None: no
    bound)."""
    compacts = plan is not None and plan.compacts
    transcript = context_transcript(messages, compacts=compacts)
    return transcript if compacts else bound_transcript(transcript, budget, overhead)
