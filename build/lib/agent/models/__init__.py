"""Model adapters behind the `Model` seam (`agent.seams.Model`).

`AnthropicModel` drives Anthropic's Messages API through the real `anthropic` SDK; it is imported
on first use, since the SDK is heavy and most tests never need it. `ScriptedModel` plays a fixed
or computed script, for tests and the offline demo, with no network.
"""

from __future__ import annotations

import typing

from agent.models._anthropic_request import DEFAULT_MAX_TOKENS, DEFAULT_MODEL, MIN_THINKING_BUDGET
from agent.models._families import EFFORT_LEVELS, ModelFamily, family_of
from agent.models._family_rules import (
    Requested,
    SettingNames,
    setting_problems,
    setting_warnings,
)
from agent.models._scripted import (
    Responder,
    ScriptedModel,
    ScriptedReply,
    opening_text,
    step_in_turn,
    turn_in_session,
)
from agent.models._thinking_display import DEFAULT_THINKING_DISPLAY, ThinkingDisplay

if typing.TYPE_CHECKING:
    from agent.models._anthropic import AnthropicModel
    from agent.models._anthropic_settings import AnthropicSettings

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_MODEL",
    "DEFAULT_THINKING_DISPLAY",
    "EFFORT_LEVELS",
    "MIN_THINKING_BUDGET",
    "AnthropicModel",
    "AnthropicSettings",
    "ModelFamily",
    "Requested",
    "Responder",
    "ScriptedModel",
    "ScriptedReply",
    "SettingNames",
    "ThinkingDisplay",
    "family_of",
    "opening_text",
    "setting_problems",
    "setting_warnings",
    "step_in_turn",
    "turn_in_session",
]


def __getattr__(name: str) -> object:
    if name in ("AnthropicModel", "AnthropicSettings"):
        from agent.models import _anthropic

        return getattr(_anthropic, name)
    raise AttributeError(f"module 'agent.models' has no attribute {name!r}")
