"""Whether a request asks for the model's thinking as text: `thinking.display`.

Newer models write what they say between tool calls into thinking blocks, and the newest ones
send those blocks empty unless asked (`display` defaults to "omitted";
https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5#text-between-tool-calls),
so a reply that streams that text as progress goes silent between its tool calls. "summarized"
brings the text back (https://platform.claude.com/docs/en/build-with-claude/thinking#controlling-thinking-display).
A family that takes no `display` answers it with a 400, so it is only ever sent to one that does
(`agent.models._families`), and only where it changes what the model would do anyway.
"""

from __future__ import annotations

from typing import Any, Literal

from agent.models._families import family_of

ThinkingDisplay = Literal["summarized", "omitted"]
DEFAULT_THINKING_DISPLAY: ThinkingDisplay = "summarized"
"""Progress shown by default: a person watching a reply expects to see what the agent is doing
between its tool calls, which on the newest models arrives only as summarized thinking. The
price is the model's time writing the summary; "omitted" gives it back."""


def with_display(
    thinking: dict[str, Any] | None, model: str, display: ThinkingDisplay | None
) -> dict[str, Any] | None:
    """`thinking` (the request's config, None when it sends none) with `display` set where the
    family takes it and it differs from what the model does without it. A model that thinks by
    default gets an explicit adaptive config to carry the field; one whose thinking is off or
    disabled is left alone (nothing to display)."""
    family = family_of(model)
    if display is None or not family.thinking_display or display == family.default_display:
        return thinking
    if thinking is None:
        if family.thinking_default != "adaptive":
            return None
        thinking = {"type": "adaptive"}
    if thinking.get("type") not in ("adaptive", "enabled"):
        return thinking
    return {**thinking, "display": display}
