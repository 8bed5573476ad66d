"""The model the bot runs, built from its settings: the Anthropic adapter with every
`ANTHROPIC_*` setting passed on, or, in a process that runs no turn, a promise of one.

`bot serve --offline` (`bot.cli.offline`) and `bot sandbox` pass a scripted model instead; nothing
here is called then, so no key is needed and the SDK is not loaded.
"""

from __future__ import annotations

from dataclasses import replace

from agent import Model, ModelError, ModelSettings
from agent.models import SettingNames, setting_problems
from bot.core.settings import Settings

AGENT_NAMES = SettingNames(
    thinking="the agent's model thinking",
    budget="ANTHROPIC_THINKING_BUDGET",
    effort="the agent's model effort",
    max_tokens="the agent's model max_tokens",
)


def check_agent_model(settings: Settings, agent_model: ModelSettings) -> None:
    """Raises `ModelError` at start, one line, when the agent's own model settings (`agent.py`)
    combined with the `ANTHROPIC_*` ones ask something of the model they name that it would
    refuse at the first turn; what the agent sets is named as the agent's."""
    asked = settings.anthropic_request()
    explicit = agent_model.model_fields_set
    names = SettingNames()
    if agent_model.model:
        asked = replace(asked, model=agent_model.model)
    if "thinking" in explicit:
        asked = replace(asked, thinking=agent_model.thinking)
        names = replace(names, thinking=AGENT_NAMES.thinking)
    if agent_model.effort is not None:
        asked = replace(asked, effort=agent_model.effort)
        names = replace(names, effort=AGENT_NAMES.effort)
    if "max_tokens" in explicit:
        asked = replace(asked, max_tokens=agent_model.max_tokens)
        names = replace(names, max_tokens=AGENT_NAMES.max_tokens)
    if asked == settings.anthropic_request():
        return  # `Settings.require` has checked these already
    problems = setting_problems(asked, names)
    if problems:
        raise ModelError(f"the agent's model settings on {asked.model}: {'; '.join(problems)}")


def build_model(settings: Settings) -> Model:
    """Raises `ModelError` at start for a missing key or settings the model would refuse."""
    from agent import AnthropicModel

    key = settings.anthropic_api_key
    return AnthropicModel(
        api_key=key.get_secret_value() if key else None,
        base_url=settings.anthropic_base_url,
        model=settings.anthropic_model,
        max_tokens=settings.anthropic_max_tokens,
        thinking=settings.anthropic_thinking,
        thinking_budget=settings.anthropic_thinking_budget,
        effort=settings.anthropic_effort,
        thinking_display=settings.anthropic_thinking_display,
        timeout=settings.anthropic_timeout,
        max_retries=settings.anthropic_max_retries,
        max_context_tokens=settings.anthropic_max_context_tokens,
        long_cache=settings.anthropic_long_cache,
        context_management=settings.anthropic_context_management,
        compact_at_tokens=settings.anthropic_compact_at_tokens,
    )


def model_for(settings: Settings, agent_model: ModelSettings | None = None) -> Model:
    """A process that runs no turn builds its model only if one ever does (`DeferredModel`);
    the agent's model settings are checked against it at start either way."""
    if agent_model is not None:
        check_agent_model(settings, agent_model)
    if settings.run_turns:
        return build_model(settings)
    from bot.core.deferred_model import DeferredModel

    return DeferredModel(lambda: build_model(settings))
