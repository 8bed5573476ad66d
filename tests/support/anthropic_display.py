"""The stand-in's `thinking.display` rules: who may ask for it, and what a reply then carries.

- `display` is "summarized" or "omitted", inside an adaptive or enabled thinking config (the
  SDK's `ThinkingConfigAdaptiveParam` / `ThinkingConfigEnabledParam`; the disabled config has no
  such field), and only for a family that takes it (`agent.models._families`, each family's
  `doc`): https://platform.claude.com/docs/en/build-with-claude/thinking#controlling-thinking-display
- Under "omitted", asked for or the family's default, a thinking block arrives with empty text
  and only its signature: no `thinking_delta` is streamed
  (https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5#text-between-tool-calls).
  A family with no `display` returns the text, as it always did.
"""

from __future__ import annotations

from typing import Any

from agent.models._families import family_of

DISPLAYS = ("summarized", "omitted")
Event = tuple[str, dict[str, Any]]


def display_problem(body: dict[str, Any]) -> str | None:
    """The 400 the API answers a `display` it does not take with; else None."""
    thinking = body.get("thinking") or {}
    if "display" not in thinking:
        return None
    kind = thinking.get("type")
    if kind not in ("adaptive", "enabled"):
        return f"thinking.{kind}.display: Extra inputs are not permitted"
    if thinking["display"] not in DISPLAYS:
        return f"thinking.{kind}.display: Input should be 'summarized' or 'omitted'"
    family = family_of(str(body.get("model", "")))
    if not family.thinking_display:
        return f"thinking.display is not supported for this model (see {family.doc})"
    return None


def shown_display(body: dict[str, Any]) -> str:
    """What the reply to `body` does with thinking text: "summarized" or "omitted"."""
    thinking = body.get("thinking") or {}
    family = family_of(str(body.get("model", "")))
    return str(thinking.get("display") or family.default_display or "summarized")


def displayed(events: list[Event], body: dict[str, Any]) -> list[Event]:
    """The scripted reply as the API streams it for `body`: under "omitted", thinking blocks
    keep their signature and lose their text."""
    if shown_display(body) != "omitted":
        return events
    return [
        (name, data)
        for name, data in events
        if not (name == "content_block_delta" and data["delta"]["type"] == "thinking_delta")
    ]
