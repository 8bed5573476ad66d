"""`AnthropicSettings`: the adapter's `ANTHROPIC_*` environment, read once at start.

Apart from the adapter so a host can read (and validate) its settings without the request and
stream code, and so the adapter module stays one idea. Importing it also builds, off the event
loop, the pydantic types the SDK would otherwise build inside the first turn's first stream.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.models._anthropic_context import ContextMode
from agent.models._anthropic_request import DEFAULT_MODEL
from agent.models._thinking_display import DEFAULT_THINKING_DISPLAY, ThinkingDisplay

Effort = Literal["low", "medium", "high", "xhigh", "max"]


def _build_stream_snapshot_type() -> None:
    """The SDK casts its stream's first snapshot to `ParsedMessage[ResponseFormatT]`, a pydantic
    generic built on first use: tens of milliseconds of CPU (over 100 on a busy machine, seen by
    the tests' loop watch), which would land on the event loop inside the first turn's first
    stream. Built here, with the import, instead."""
    try:
        from anthropic.lib._parse._response import ResponseFormatT
        from anthropic.types.beta.parsed_beta_message import ParsedBetaMessage
        from anthropic.types.parsed_message import ParsedMessage
    except ImportError:  # a later SDK moved them: then only its first stream pays
        return
    _ = ParsedMessage[ResponseFormatT]
    _beta = ParsedBetaMessage[ResponseFormatT]  # the beta endpoint's (context management)
    try:  # the beta stream's event union: its validator, too, is built on first use
        from anthropic._models import construct_type
        from anthropic.types.beta import BetaRawMessageStreamEvent
    except ImportError:
        return
    construct_type(type_=BetaRawMessageStreamEvent, value={"type": "message_start", "message": {}})


_build_stream_snapshot_type()


class AnthropicSettings(BaseSettings):
    """Read once at start from `ANTHROPIC_*` variables, then passed to `AnthropicModel`.

    The names are the bot's (`bot.core.settings`), so one environment configures either host.
    """

    model_config = SettingsConfigDict(
        env_prefix="ANTHROPIC_", extra="ignore", populate_by_name=True
    )

    api_key: SecretStr | None = None
    model: str = DEFAULT_MODEL
    max_tokens: int | None = Field(default=None, ge=1)
    """Unset: the model family's own output budget (`ModelFamily.default_max_tokens`)."""
    base_url: str | None = None
    max_retries: int = Field(default=2, ge=0)
    timeout: float = Field(
        default=600.0,
        gt=0,
        validation_alias=AliasChoices("ANTHROPIC_TIMEOUT_SECONDS", "ANTHROPIC_TIMEOUT"),
    )
    """Seconds; `ANTHROPIC_TIMEOUT` is the older name, still read."""
    thinking: bool | None = None
    """Unset: the model's default (off up to Claude 4.8, on from Claude 5)."""
    thinking_budget: int | None = None
    effort: Effort | None = None
    """`output_config.effort`, on the families that take it; unset: the model's default."""
    thinking_display: ThinkingDisplay | None = DEFAULT_THINKING_DISPLAY
    """`ANTHROPIC_THINKING_DISPLAY`: see `agent.models._thinking_display`."""
    max_context_tokens: int | None = None
    long_cache: bool = True
    """`ANTHROPIC_LONG_CACHE=false` keeps every breakpoint at the 5-minute default (a gateway
    that refuses `ttl`); prefixes then expire while a person decides."""
    context_management: ContextMode = "auto"
    """`auto`: the API's context management where the model's family takes it (compaction,
    else tool-result clearing); `off`: only the local window (`max_context_tokens`)."""
    compact_at_tokens: int | None = None
    """Input tokens at which the API compacts the thread; unset: the API's default (150,000)."""
