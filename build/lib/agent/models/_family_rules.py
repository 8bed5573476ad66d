"""Settings checked against the model family they will be sent to, and translated into what it
accepts.

Two moments, one set of rules (`agent.models._families`). At start, `setting_problems` names
every combination the API would refuse at the first turn (a thinking budget on a model whose
thinking is adaptive only, an effort the model does not take, an output budget above its
maximum), one line each, by setting name, so a deploy stops before it serves anyone. At each
request, `thinking_param` and `effort_param` translate what was asked into what the family
accepts, so a combination no start-up check saw (an agent's own model settings naming another
model) costs a warning in the log, never a 400 in front of a user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.models._anthropic_request import MIN_THINKING_BUDGET
from agent.models._families import EFFORT_LEVELS, ModelFamily, family_of


@dataclass(frozen=True, kw_only=True)
class SettingNames:
    """How a message names each setting: the environment's names by default; an agent's model
    settings name its fields instead, so the person reading knows which file to edit."""

    thinking: str = "ANTHROPIC_THINKING"
    budget: str = "ANTHROPIC_THINKING_BUDGET"
    effort: str = "ANTHROPIC_EFFORT"
    max_tokens: str = "ANTHROPIC_MAX_TOKENS"


ENVIRONMENT = SettingNames()


@dataclass(frozen=True, kw_only=True)
class Requested:
    """What the settings ask of one model; None is "not set": the family's default applies."""

    model: str
    thinking: bool | None = None
    budget: int | None = None
    effort: str | None = None
    max_tokens: int | None = None

    @property
    def family(self) -> ModelFamily:
        return family_of(self.model)

    @property
    def output_budget(self) -> int:
        return self.max_tokens if self.max_tokens is not None else self.family.default_max_tokens


def setting_problems(asked: Requested, names: SettingNames = ENVIRONMENT) -> list[str]:
    """Every combination the API would refuse for `asked.model`, one line each; empty: none."""
    family, model = asked.family, asked.model
    problems: list[str] = []
    if asked.max_tokens is not None and asked.max_tokens > family.max_output_tokens:
        problems.append(
            f"{names.max_tokens} ({asked.max_tokens}) is above the {family.max_output_tokens} "
            f"output tokens {model} can write"
        )
    problems += _effort_problems(asked, names)
    if asked.budget is not None:
        if "enabled" not in family.thinking_types:
            problems.append(
                f"{names.budget} is not supported by {model}, whose thinking is adaptive: unset "
                f"it and set {names.effort} ({', '.join(family.effort_levels_in_order)}) for how "
                "much it thinks"
            )
        elif asked.budget < MIN_THINKING_BUDGET:
            problems.append(
                f"{names.budget} ({asked.budget}) must be at least {MIN_THINKING_BUDGET}"
            )
        elif asked.budget >= asked.output_budget:
            problems.append(
                f"{names.budget} ({asked.budget}) must be below {names.max_tokens} "
                f"({asked.output_budget}): thinking tokens count toward max_tokens"
            )
    elif asked.thinking and not {"adaptive"} & family.thinking_types:
        problems.append(
            f"{names.thinking}=true on {model} needs {names.budget}: this model has no "
            "adaptive thinking"
        )
    if asked.thinking is False and family.thinking_off in ("disabled", "between_tools"):
        effort = asked.effort or family.default_effort
        if effort is not None and effort not in family.thinking_off_efforts:
            problems.append(
                f"{names.thinking}=false on {model} needs {names.effort} at high or lower: "
                f"thinking cannot be turned off at {effort}"
            )
    return problems


def setting_warnings(asked: Requested, names: SettingNames = ENVIRONMENT) -> list[str]:
    """What is accepted but does nothing on this model: said once, at start."""
    if asked.thinking is False and asked.family.thinking_off is None:
        return [
            f"{names.thinking}=false has no effect on {asked.model}: its thinking is always on "
            f"(set {names.effort}=low for the least of it)"
        ]
    return []


def _effort_problems(asked: Requested, names: SettingNames) -> list[str]:
    family, effort = asked.family, asked.effort
    if effort is None:
        return []
    if effort not in EFFORT_LEVELS:
        return [f"{names.effort} ({effort!r}) must be one of {', '.join(EFFORT_LEVELS)}"]
    if not family.effort_levels:
        return [
            f"{names.effort} is not supported by {asked.model}: unset it, or choose a model "
            "that takes effort (see docs/models.md)"
        ]
    if effort not in family.effort_levels:
        return [
            f"{names.effort}={effort} is not accepted by {asked.model} (it takes "
            f"{', '.join(family.effort_levels_in_order)})"
        ]
    return []


def thinking_param(asked: Requested) -> dict[str, Any] | None:
    """The `thinking` config to send, or None to send none; never one the family refuses.

    None asked: none sent, the model's own default applies. Asked on: a manual budget where the
    family takes one, else adaptive. Asked off: nothing where the family thinks only when asked,
    else its lowest setting ("disabled", or "between_tools" where that is refused), unless the
    effort forbids turning it off or nothing can (then thinking stays on, as the family does).
    """
    family = asked.family
    if asked.thinking is None:
        return None
    if asked.thinking:
        if asked.budget is not None and "enabled" in family.thinking_types:
            return {"type": "enabled", "budget_tokens": asked.budget}
        return {"type": "adaptive"} if "adaptive" in family.thinking_types else None
    off = family.thinking_off
    if not off:
        return None
    effort = effort_param(asked) or family.default_effort
    if effort is not None and effort not in family.thinking_off_efforts:
        return None
    return {"type": off}


def effort_param(asked: Requested) -> str | None:
    """The effort to send: what was asked, where the family takes that level; else none."""
    return asked.effort if asked.effort in asked.family.effort_levels else None
