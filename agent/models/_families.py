"""What each Claude model family accepts, in one table: the adapter and the stand-in read it.

The Messages API's contract moved with the models: thinking that can be turned off or budgeted,
then thinking always on with `output_config.effort` as the depth control; forced tool use, then
none; thinking blocks any model accepted, then blocks bound to the model that wrote them. A
request the model refuses is a 400 at the first turn, after the deploy went out, so every rule
a request depends on lives here, keyed by model id prefix (the longest prefix wins, so
`claude-opus-5-5` is not read as `claude-opus-5`), each family citing the page it follows.

A model id this table does not know (a gateway's alias, a model newer than the table) is read
as the newest family: the contract only ever tightened, and a rule too strict for an older
model costs a feature, while one too loose costs every turn.
"""

from __future__ import annotations

from dataclasses import dataclass

EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
"""`OutputConfigParam.effort` in the installed SDK, lowest first."""


@dataclass(frozen=True, kw_only=True)
class ModelFamily:
    name: str
    prefixes: tuple[str, ...]
    doc: str
    """The page the family's rules follow."""
    thinking_types: frozenset[str]
    """The `thinking.type` values the API accepts; any other is a 400."""
    thinking_default: str | None
    """What a request without `thinking` gets: "adaptive", or None for no thinking."""
    effort_levels: frozenset[str]
    """The `output_config.effort` values accepted; empty when the family takes no effort."""
    default_effort: str | None
    forced_tool_choice: bool
    """Whether `tool_choice` of type `any` / `tool` is accepted."""
    thinking_display: bool
    """Whether `thinking.display` ("summarized" / "omitted") is accepted."""
    default_display: str | None
    """What the API does without `display`: "omitted" means thinking arrives empty."""
    thinking_bound: bool
    """Thinking blocks are bound to the model that wrote them: another model's are a 400."""
    default_max_tokens: int
    """The bot's output budget for the family when no setting names one: thinking counts
    toward `max_tokens`, so an always-thinking family needs more than a reply's length."""
    max_output_tokens: int
    context_window: int
    context_edits: frozenset[str]
    """The `context_management` edit types the family takes (beta); empty: none."""

    def owns(self, model: str) -> int:
        """The length of this family's longest prefix of `model`, 0 when it has none."""
        return max((len(p) for p in self.prefixes if model.startswith(p)), default=0)


LEGACY = ModelFamily(
    name="claude-4",
    prefixes=("claude-opus-4", "claude-sonnet-4", "claude-haiku-4", "claude-3"),
    doc="https://platform.claude.com/docs/en/build-with-claude/extended-thinking",
    thinking_types=frozenset({"enabled", "disabled", "adaptive"}),
    thinking_default=None,
    effort_levels=frozenset(),
    default_effort=None,
    forced_tool_choice=True,
    thinking_display=False,
    default_display=None,
    thinking_bound=False,
    default_max_tokens=4096,
    max_output_tokens=64_000,
    context_window=200_000,
    context_edits=frozenset({"clear_tool_uses_20250919"}),
)

CLAUDE_5 = ModelFamily(
    name="claude-5",
    prefixes=("claude-opus-5", "claude-sonnet-5", "claude-fable-5", "claude-mythos-5"),
    doc="https://platform.claude.com/docs/en/about-claude/models/whats-new-opus-5",
    thinking_types=frozenset({"enabled", "disabled", "adaptive"}),
    thinking_default="adaptive",
    effort_levels=frozenset(EFFORT_LEVELS),
    default_effort="high",
    forced_tool_choice=True,
    thinking_display=True,
    default_display="summarized",
    thinking_bound=False,
    default_max_tokens=16_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"}),
)

ADAPTIVE_ONLY = ModelFamily(
    name="claude-5.5",
    prefixes=("claude-opus-5-5", "claude-fable-5-1", "claude-fable-5-2"),
    doc="https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5",
    thinking_types=frozenset({"adaptive"}),
    thinking_default="adaptive",
    effort_levels=frozenset(EFFORT_LEVELS),
    default_effort="medium",
    forced_tool_choice=False,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=True,
    default_max_tokens=16_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset(
        {"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"}
    ),
)

FAMILIES = (LEGACY, CLAUDE_5, ADAPTIVE_ONLY)
NEWEST = ADAPTIVE_ONLY


def family_of(model: str) -> ModelFamily:
    """The family whose prefix of `model` is longest; the newest family for an unknown id."""
    best = max(FAMILIES, key=lambda family: family.owns(model))
    return best if best.owns(model) else NEWEST
