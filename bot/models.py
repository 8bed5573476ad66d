"""The model the bot runs, built from its settings: the Anthropic adapter with every
`ANTHROPIC_*` setting passed on, or, in a process that runs no turn, a promise of one.

`bot serve --offline` (`bot.offline`) and `bot sandbox` pass a scripted model instead; nothing
here is called then, so no key is needed and the SDK is not loaded.
"""

from __future__ import annotations

from agent import Model
from bot.settings import Settings


def build_model(settings: Settings) -> Model:
    """Raises `ModelError` at start for a missing key or a budget the API would refuse."""
    from agent import AnthropicModel

    key = settings.anthropic_api_key
    return AnthropicModel(
        api_key=key.get_secret_value() if key else None,
        base_url=settings.anthropic_base_url,
        model=settings.anthropic_model,
        max_tokens=settings.anthropic_max_tokens,
        thinking=settings.anthropic_thinking,
        thinking_budget=settings.anthropic_thinking_budget,
        thinking_display=settings.anthropic_thinking_display,
        timeout=settings.anthropic_timeout,
        max_retries=settings.anthropic_max_retries,
        max_context_tokens=settings.anthropic_max_context_tokens,
        long_cache=settings.anthropic_long_cache,
    )


def model_for(settings: Settings) -> Model:
    """A process that runs no turn builds its model only if one ever does (`DeferredModel`)."""
    if settings.run_turns:
        return build_model(settings)
    from bot.deferred_model import DeferredModel

    return DeferredModel(lambda: build_model(settings))
