"""What each Claude model family accepts, in one table: the adapter and the stand-in read it.

The Messages API's contract moved with the models: thinking that can be turned off or budgeted,
then thinking always on with `output_config.effort` as the depth control; forced tool use, then
none; thinking blocks any model accepted, then blocks bound to the model that wrote them. A
request the model refuses is a 400 at the first turn, after the deploy went out, so every rule
a request depends on lives here, keyed by model id prefix (the longest prefix wins, so
`claude-opus-5-5` is not read as `claude-opus-5`), each family citing the page it follows.

A model id this table does not know (a gateway's alias, a model newer than the table) is read
as the newest family: the contract only ever tightened, and a rule too strict for an older
model costs a feature, while one too loose costs every turn. Where the docs left a fact open
(which effort levels allow thinking to be turned off on a model whose page does not say), the
table takes the stricter reading, for the same reason.
"""

from __future__ import annotations

from dataclasses import dataclass

EFFORT_LEVELS = ("low", "medium", "high", "xhigh", "max")
"""`OutputConfigParam.effort` in the installed SDK, lowest first."""
_ALL_EFFORTS = frozenset(EFFORT_LEVELS)
_UP_TO_HIGH = frozenset({"low", "medium", "high"})


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
    thinking_off_efforts: frozenset[str] = _ALL_EFFORTS
    """The effort levels at which thinking may be turned off ("disabled" / "between_tools"):
    a thinking-by-default model refuses to stop thinking at `xhigh` or `max`."""

    def owns(self, model: str) -> int:
        """The length of this family's longest prefix of `model`, 0 when it has none."""
        return max((len(p) for p in self.prefixes if model.startswith(p)), default=0)

    @property
    def effort_levels_in_order(self) -> tuple[str, ...]:
        return tuple(level for level in EFFORT_LEVELS if level in self.effort_levels)

    @property
    def thinking_off(self) -> str | None:
        """How a request turns thinking off on this family: "" (send no `thinking`: the
        family does not think unless asked), "disabled", "between_tools" (the lowest setting
        where "disabled" is refused), or None when thinking cannot be turned off at all."""
        if self.thinking_default is None:
            return ""
        for kind in ("disabled", "between_tools"):
            if kind in self.thinking_types:
                return kind
        return None


CLAUDE_4 = ModelFamily(
    name="claude-4",
    prefixes=("claude-3", "claude-opus-4", "claude-sonnet-4", "claude-haiku-4"),
    doc="https://platform.claude.com/docs/en/build-with-claude/extended-thinking",
    # Manual thinking only: adaptive thinking came with the 4.6 models. Claude Opus 4.5 also
    # takes `effort`; the table does not offer it there (stricter, see the module docstring).
    thinking_types=frozenset({"enabled", "disabled"}),
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

CLAUDE_4_6 = ModelFamily(
    name="claude-4.6",
    prefixes=("claude-opus-4-6", "claude-sonnet-4-6"),
    doc="https://platform.claude.com/docs/en/models/sonnet-4-6/overview",
    # Adaptive thinking and effort arrive; a manual budget still works (deprecated). These
    # models predate `xhigh`.
    thinking_types=frozenset({"enabled", "disabled", "adaptive"}),
    thinking_default=None,
    effort_levels=frozenset({"low", "medium", "high", "max"}),
    default_effort="high",
    forced_tool_choice=True,
    thinking_display=True,
    default_display="summarized",
    thinking_bound=False,
    default_max_tokens=4096,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"}),
)

CLAUDE_4_7 = ModelFamily(
    name="claude-4.7",
    prefixes=("claude-opus-4-7", "claude-opus-4-8", "claude-mythos-preview"),
    doc="https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-adaptive-thinking.html",
    # Adaptive only: a manual budget (and, per the same page, "disabled") is a 400. A request
    # without `thinking` does not think, so "off" is simply sending none.
    thinking_types=frozenset({"adaptive"}),
    thinking_default=None,
    effort_levels=_ALL_EFFORTS,
    default_effort="high",
    forced_tool_choice=True,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=False,
    default_max_tokens=4096,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"}),
)

CLAUDE_5 = ModelFamily(
    name="claude-5",
    prefixes=("claude-opus-5", "claude-sonnet-5"),
    doc="https://platform.claude.com/docs/en/about-claude/models/whats-new-opus-5",
    # Thinking on by default; "disabled" is accepted only at effort high or lower; a manual
    # budget is a 400 on Claude Sonnet 5 (https://platform.claude.com/docs/en/models/sonnet-5/
    # overview), so the family refuses it for both.
    thinking_types=frozenset({"adaptive", "disabled"}),
    thinking_default="adaptive",
    effort_levels=_ALL_EFFORTS,
    default_effort="high",
    forced_tool_choice=True,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=False,
    default_max_tokens=16_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"}),
    thinking_off_efforts=_UP_TO_HIGH,
)

FABLE_5 = ModelFamily(
    name="claude-fable-5",
    prefixes=("claude-fable-5", "claude-mythos-5"),
    doc="https://docs.aws.amazon.com/bedrock/latest/userguide/claude-messages-adaptive-thinking.html",
    # Adaptive only ("enabled" and "disabled" are 400s); forced tool use and unbound thinking
    # blocks still, since those changes came with Claude Fable 5.1.
    thinking_types=frozenset({"adaptive"}),
    thinking_default="adaptive",
    effort_levels=_ALL_EFFORTS,
    default_effort="high",
    forced_tool_choice=True,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=False,
    default_max_tokens=32_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset({"clear_tool_uses_20250919", "clear_thinking_20251015"}),
)

HAIKU_5_5 = ModelFamily(
    name="claude-haiku-5.5",
    prefixes=("claude-haiku-5",),
    doc="https://platform.claude.com/docs/en/models/haiku-5-5/whats-new-haiku-5-5",
    # Adaptive thinking with effort (default medium); a manual budget is a 400; thinking
    # blocks work only in the account that wrote them.
    thinking_types=frozenset({"adaptive", "disabled"}),
    thinking_default="adaptive",
    effort_levels=_ALL_EFFORTS,
    default_effort="medium",
    forced_tool_choice=True,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=True,
    default_max_tokens=16_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset(
        {"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"}
    ),
    thinking_off_efforts=_UP_TO_HIGH,
)

SONNET_5_5 = ModelFamily(
    name="claude-sonnet-5.5",
    prefixes=("claude-sonnet-5-5",),
    doc="https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5",
    # "disabled" is a 400 whose message points to "between_tools", the lowest setting, itself
    # refused at xhigh and max; no manual budget, no forced tool use, bound thinking blocks.
    thinking_types=frozenset({"adaptive", "between_tools"}),
    thinking_default="adaptive",
    effort_levels=_ALL_EFFORTS,
    default_effort="high",
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
    thinking_off_efforts=_UP_TO_HIGH,
)

OPUS_5_5 = ModelFamily(
    name="claude-opus-5.5",
    prefixes=("claude-opus-5-5",),
    doc="https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5",
    # Thinking always on: "disabled" and a manual budget are 400s; effort defaults to medium.
    thinking_types=frozenset({"adaptive"}),
    thinking_default="adaptive",
    effort_levels=_ALL_EFFORTS,
    default_effort="medium",
    forced_tool_choice=False,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=True,
    default_max_tokens=32_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset(
        {"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"}
    ),
)

FABLE_5_1 = ModelFamily(
    name="claude-fable-5.1",
    prefixes=("claude-fable-5-1", "claude-fable-5-2", "claude-mythos-5-1", "claude-mythos-5-2"),
    doc="https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5",
    # The Opus 5.5 page: its first three breaking changes (thinking always on, no forced tool
    # use, bound thinking blocks) "also apply to Claude Fable 5.1"; effort defaults to high
    # (https://platform.claude.com/docs/en/about-claude/models/overview).
    thinking_types=frozenset({"adaptive"}),
    thinking_default="adaptive",
    effort_levels=_ALL_EFFORTS,
    default_effort="high",
    forced_tool_choice=False,
    thinking_display=True,
    default_display="omitted",
    thinking_bound=True,
    default_max_tokens=32_000,
    max_output_tokens=128_000,
    context_window=1_000_000,
    context_edits=frozenset(
        {"clear_tool_uses_20250919", "clear_thinking_20251015", "compact_20260112"}
    ),
)

FAMILIES = (
    CLAUDE_4,
    CLAUDE_4_6,
    CLAUDE_4_7,
    CLAUDE_5,
    FABLE_5,
    HAIKU_5_5,
    SONNET_5_5,
    OPUS_5_5,
    FABLE_5_1,
)
LEGACY = CLAUDE_4
"""The oldest family: manual thinking, forced tool use, no effort."""
ADAPTIVE_ONLY = OPUS_5_5
"""The strictest family: thinking cannot be turned off, no forced tool use, bound blocks."""
NEWEST = ADAPTIVE_ONLY


def family_of(model: str) -> ModelFamily:
    """The family whose prefix of `model` is longest; the newest family for an unknown id."""
    best = max(FAMILIES, key=lambda family: family.owns(model))
    return best if best.owns(model) else NEWEST
