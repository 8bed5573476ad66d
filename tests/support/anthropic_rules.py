"""The Anthropic stand-in's per-family rules: what a model refuses, read off `body["model"]`.

The facts are the adapter's own table (`agent.models._families`), each family citing the page
it follows, so a test on an old model and on a new one runs the same bot code against the rules
of each. The messages are the API's where its docs quote them; every rule below names the doc
it follows, and `tests/unit/test_anthropic_rules.py` shows each refusal.
"""

from __future__ import annotations

from typing import Any

from agent.models._families import EFFORT_LEVELS, ModelFamily, family_of

ADAPTIVE_ONLY_TEXT = (
    '"thinking.type.{kind}" is not supported for this model. Use "thinking.type.adaptive" and '
    '"output_config.effort" to control thinking behavior.'
)
"""Quoted by https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5
("Thinking can't be disabled"), for "disabled" and for "enabled"."""
DISPLAYS = ("summarized", "omitted")
"""`ThinkingConfigAdaptiveParam.display` in the installed SDK."""


def family_problem(body: dict[str, Any]) -> str | None:
    """What `body["model"]`'s family answers 400 for, or None."""
    family = family_of(str(body["model"]))
    return (
        _max_tokens_problem(body, family)
        or _thinking_problem(body, family)
        or _effort_problem(body, family)
        or _thinking_off_problem(body, family)
        or _tool_choice_problem(body, family)
    )


def _max_tokens_problem(body: dict[str, Any], family: ModelFamily) -> str | None:
    # https://platform.claude.com/docs/en/about-claude/models/overview ("Max output"): a larger
    # max_tokens is refused, not lowered.
    if body["max_tokens"] > family.max_output_tokens:
        return (
            f"max_tokens: {body['max_tokens']} > {family.max_output_tokens}, which is the "
            f"maximum allowed number of output tokens for {body['model']}"
        )
    return None


def _thinking_problem(body: dict[str, Any], family: ModelFamily) -> str | None:
    thinking = body.get("thinking")
    if thinking is None:
        return None
    kind = thinking.get("type")
    if kind not in family.thinking_types:
        if family.thinking_types == {"adaptive"} and kind in ("disabled", "enabled"):
            # https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5
            return ADAPTIVE_ONLY_TEXT.format(kind=kind)
        if kind == "disabled" and "between_tools" in family.thinking_types:
            # https://platform.claude.com/docs/en/models/sonnet-5-5/whats-new-sonnet-5-5
            # ("Turn off up-front thinking"): the 400 points to between_tools.
            return (
                '"thinking.type.disabled" is not supported for this model. Use '
                '"thinking.type.between_tools" to turn off up-front thinking.'
            )
        # https://platform.claude.com/docs/en/build-with-claude/extended-thinking: older models
        # take manual thinking only; adaptive came with the 4.6 models.
        return f'"thinking.type.{kind}" is not supported for this model.'
    if "display" in thinking:
        # https://platform.claude.com/docs/en/build-with-claude/thinking#controlling-thinking-display
        if not family.thinking_display:
            return "thinking.display: Extra inputs are not permitted"
        if thinking["display"] not in DISPLAYS:
            return f"thinking.display: Input should be {' or '.join(map(repr, DISPLAYS))}"
    return None


def _effort_problem(body: dict[str, Any], family: ModelFamily) -> str | None:
    # https://platform.claude.com/docs/en/build-with-claude/effort: the levels, and the models
    # that take them (none before Claude 4.6; xhigh from Claude 4.7).
    effort = (body.get("output_config") or {}).get("effort")
    if effort is None:
        return None
    if effort not in EFFORT_LEVELS:
        return (
            "output_config.effort: Input should be "
            f"{', '.join(repr(level) for level in EFFORT_LEVELS)}"
        )
    if not family.effort_levels:
        return f"output_config.effort: effort is not supported by model {body['model']}"
    if effort not in family.effort_levels:
        return (
            f'output_config.effort "{effort}" is not supported by model {body["model"]}; '
            f"supported values: {list(family.effort_levels_in_order)}"
        )
    return None


def _thinking_off_problem(body: dict[str, Any], family: ModelFamily) -> str | None:
    # https://platform.claude.com/docs/en/about-claude/models/whats-new-opus-5 (disabled only at
    # effort high or lower) and .../sonnet-5-5/whats-new-sonnet-5-5 (between_tools likewise).
    kind = (body.get("thinking") or {}).get("type")
    if kind not in ("disabled", "between_tools"):
        return None
    effort = (body.get("output_config") or {}).get("effort") or family.default_effort
    if effort is not None and effort not in family.thinking_off_efforts:
        return f'"thinking.type.{kind}" is not supported with effort "{effort}" on this model.'
    return None


def _tool_choice_problem(body: dict[str, Any], family: ModelFamily) -> str | None:
    # https://platform.claude.com/docs/en/models/opus-5-5/whats-new-opus-5-5 ("Forced tool use
    # is not supported"): tool_choice any / tool is a 400; auto and none are accepted.
    choice = body.get("tool_choice")
    if choice is None:
        return None
    kind = choice.get("type")
    if kind not in ("auto", "any", "tool", "none"):
        return f"tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none' ({kind!r})"
    if kind in ("any", "tool") and not family.forced_tool_choice:
        return (
            f'tool_choice.type "{kind}" is not supported for this model. Use "auto" or "none", '
            "and say in the prompt which tool to use."
        )
    if kind == "tool" and choice.get("name") not in {t["name"] for t in body.get("tools", [])}:
        return f"tool_choice.name: no tool named {choice.get('name')!r} in tools"
    return None
