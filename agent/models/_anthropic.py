"""The production `Model`: Anthropic's Messages API through the official SDK, streamed.

Retries come in two kinds. A request refused before anything streamed (429, 5xx, 529
overloaded) is the SDK's to retry, with its backoff and the server's `retry-after`; nothing
reached a subscriber, so there is nothing to take back. A stream that breaks after it began (an
`error` event such as `overloaded_error`, or a dropped connection) is past the SDK's retry loop,
so this adapter sends the request again itself, and if text had already streamed it yields
`StreamRestart` first: renderers then discard the partial text instead of showing it twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import anthropic
import httpx2
from anthropic.lib.streaming import BetaAsyncMessageStreamManager
from anthropic.types import (
    MessageCountTokensToolParam,
    MessageParam,
    TextBlockParam,
    ThinkingConfigParam,
    ToolParam,
)
from anthropic.types.beta import (
    BetaContextManagementConfigParam,
    BetaMessageParam,
    BetaTextBlockParam,
    BetaThinkingConfigParam,
    BetaToolParam,
)
from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent._errors import ModelError
from agent.models._anthropic_budget import fit_by_count
from agent.models._anthropic_context import (
    ContextMode,
    ContextPlan,
    check_compact_at,
    compacts,
    context_plan,
    request_transcript,
)
from agent.models._anthropic_reply import StreamCutError, describe, is_restartable, to_reply
from agent.models._anthropic_request import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL,
    MIN_THINKING_BUDGET,
    Block,
    accepts_long_cache,
    estimate_tokens,
    message_params,
    system_blocks,
    tool_params,
)
from agent.seams import ModelEvent, ModelRequest, ModelSettings, StreamRestart, TextDelta

log = logging.getLogger(__name__)


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

MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set: the Anthropic model needs an API key. Set ANTHROPIC_API_KEY "
    "in the environment, or select the scripted model for offline use."
)
MAX_TOKENS_SETTING = "ANTHROPIC_MAX_TOKENS"
"""Where an operator raises the default `max_tokens`: the same name for the bot and
`AnthropicSettings`, so an error can say it whichever host built this model."""
_MAX_RESTART_DELAY = 8.0


class AnthropicSettings(BaseSettings):
    """Read once at start from `ANTHROPIC_*` variables, then passed to `AnthropicModel`.

    The names are the bot's (`bot.settings`), so one environment configures either host.
    """

    model_config = SettingsConfigDict(
        env_prefix="ANTHROPIC_", extra="ignore", populate_by_name=True
    )

    api_key: SecretStr | None = None
    model: str = DEFAULT_MODEL
    max_tokens: int = DEFAULT_MAX_TOKENS
    base_url: str | None = None
    max_retries: int = Field(default=2, ge=0)
    timeout: float = Field(
        default=600.0,
        gt=0,
        validation_alias=AliasChoices("ANTHROPIC_TIMEOUT_SECONDS", "ANTHROPIC_TIMEOUT"),
    )
    """Seconds; `ANTHROPIC_TIMEOUT` is the older name, still read."""
    thinking: bool = False
    thinking_budget: int | None = None
    max_context_tokens: int | None = None
    long_cache: bool = True
    """`ANTHROPIC_LONG_CACHE=false` keeps every breakpoint at the 5-minute default (a gateway
    that refuses `ttl`); prefixes then expire while a person decides."""
    context_management: ContextMode = "auto"
    """`auto`: the API's context management where the model's family takes it (compaction,
    else tool-result clearing); `off`: only the local window (`max_context_tokens`)."""
    compact_at_tokens: int | None = None
    """Input tokens at which the API compacts the thread; unset: the API's default (150,000)."""


@dataclass(frozen=True, kw_only=True)
class _Params:
    """One request as the SDK takes it; kept whole so a restart sends exactly the same bytes."""

    model: str
    max_tokens: int
    system: list[Block]
    messages: list[Block]
    tools: list[Block]
    thinking: dict[str, Any] | None
    context: ContextPlan | None = None
    """Set: the request goes to the beta endpoint with `context_management` and its betas."""


class AnthropicModel:
    """`Model` over `AsyncAnthropic`; pass `client=` to drive a stand-in server in tests.

    Request settings override the constructor's defaults only where they were set explicitly
    (`ModelSettings.model_fields_set`), since `ModelSettings` gives every field a default.
    Thinking is off unless asked for; when on, it is adaptive, or manual with `thinking_budget`,
    which is checked against the API's bounds here, at start, rather than at the first turn that
    thinks. A long thread is the API's to compact where the model's family takes it
    (`context_management="auto"`, see `_anthropic_context`); otherwise `max_context_tokens`
    bounds the request by the API's token count (see `fit_by_count`).
    A request after which the turn may wait for a person (`ModelRequest.may_wait`) is cached
    with the 1-hour lifetime where the model takes it, unless `long_cache=False`.
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        model: str = DEFAULT_MODEL,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        thinking: bool = False,
        thinking_budget: int | None = None,
        max_context_tokens: int | None = None,
        long_cache: bool = True,
        context_management: ContextMode = "auto",
        compact_at_tokens: int | None = None,
        restart_delay: float = 0.5,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        if thinking_budget is not None:
            _check_budget(thinking_budget, max_tokens)
        try:
            check_compact_at(compact_at_tokens)
        except ValueError as err:
            raise ModelError(str(err)) from None
        if client is None:
            if not (api_key and api_key.strip()):
                raise ModelError(MISSING_KEY)
            client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
            )
            self._owns_client = True
        else:
            self._owns_client = False
        self._client = client
        self._model = model
        self._max_tokens = max_tokens
        self._thinking = thinking
        self._thinking_budget = thinking_budget
        self._max_context_tokens = max_context_tokens
        self._long_cache = long_cache
        self._context_management = context_management
        self._compact_at_tokens = compact_at_tokens
        self._max_restarts = client.max_retries
        self._restart_delay = restart_delay
        self._warned_temperature = False
        self._warned_count = False

    @classmethod
    def from_settings(cls, settings: AnthropicSettings) -> AnthropicModel:
        """Raises `ModelError` naming ANTHROPIC_API_KEY when it is missing, at startup."""
        key = settings.api_key.get_secret_value() if settings.api_key else None
        return cls(
            api_key=key,
            model=settings.model,
            max_tokens=settings.max_tokens,
            base_url=settings.base_url,
            max_retries=settings.max_retries,
            timeout=settings.timeout,
            thinking=settings.thinking,
            thinking_budget=settings.thinking_budget,
            max_context_tokens=settings.max_context_tokens,
            long_cache=settings.long_cache,
            context_management=settings.context_management,
            compact_at_tokens=settings.compact_at_tokens,
        )

    @classmethod
    def from_env(cls) -> AnthropicModel:
        """For a process entry point; a host that has its own settings calls `from_settings`."""
        return cls.from_settings(AnthropicSettings())

    def __repr__(self) -> str:
        return f"AnthropicModel(model={self._model!r}, base_url={str(self._client.base_url)!r})"

    async def aclose(self) -> None:
        """Closes the HTTP client if this adapter made it; an injected one is its owner's."""
        if self._owns_client:
            await self._client.close()

    def compacts_context(self, settings: ModelSettings) -> bool:
        """The `Model` seam's optional capability: the API compacts a request with these
        settings exactly when `_params` asks it to (the same rule), so the runtime loads the
        thread from its newest compaction instead of a window."""
        return compacts(settings.model or self._model, self._context_management)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = await self._counted(request, self._params(request))
        restarts = 0
        while True:
            began = finished = streamed = False
            try:
                async with self._open(params) as stream:
                    began = True
                    async for event in stream:
                        if event.type == "text" and event.text:
                            streamed = True
                            yield TextDelta(text=event.text)
                        elif event.type == "message_stop":
                            finished = True
                    if not finished:
                        raise StreamCutError
                    message = await stream.get_final_message()
            except (anthropic.APIError, httpx2.TransportError, StreamCutError) as err:
                if not (began and is_restartable(err) and restarts < self._max_restarts):
                    raise ModelError(describe(err)) from None
                if streamed:
                    yield StreamRestart(reason=describe(err))
                await asyncio.sleep(min(self._restart_delay * 2**restarts, _MAX_RESTART_DELAY))
                restarts += 1
                continue
            except (anthropic.AnthropicError, ValueError) as err:
                raise ModelError(describe(err)) from None
            explicit = "max_tokens" in request.settings.model_fields_set
            yield to_reply(
                message,
                max_tokens=params.max_tokens,
                max_tokens_from="the agent's model settings" if explicit else MAX_TOKENS_SETTING,
            )
            return

    def _open(
        self, params: _Params
    ) -> anthropic.AsyncMessageStreamManager[None] | BetaAsyncMessageStreamManager[None]:
        if params.context is not None:
            return self._client.beta.messages.stream(
                model=params.model,
                max_tokens=params.max_tokens,
                messages=cast("list[BetaMessageParam]", params.messages),
                system=cast("list[BetaTextBlockParam]", params.system) or anthropic.omit,
                tools=cast("list[BetaToolParam]", params.tools) or anthropic.omit,
                thinking=cast("BetaThinkingConfigParam", params.thinking) or anthropic.omit,
                context_management=cast("BetaContextManagementConfigParam", params.context.param()),
                betas=list(params.context.betas),
            )
        return self._client.messages.stream(
            model=params.model,
            max_tokens=params.max_tokens,
            messages=cast("list[MessageParam]", params.messages),
            system=cast("list[TextBlockParam]", params.system) or anthropic.omit,
            tools=cast("list[ToolParam]", params.tools) or anthropic.omit,
            thinking=cast("ThinkingConfigParam", params.thinking) or anthropic.omit,
        )

    async def _counted(self, request: ModelRequest, params: _Params) -> _Params:
        """Where a local budget is enforced, the API's count decides what fits (see
        `fit_by_count`); unreachable, the estimate `_params` applied stands."""
        budget = self._max_context_tokens
        if budget is None or (params.context is not None and params.context.compacts):
            return params
        long_cache = request.may_wait and self._long_cache and accepts_long_cache(params.model)
        overhead = estimate_tokens([params.system, params.tools])
        whole = request_transcript(request.messages, params.context, None, overhead)
        try:
            kept = await fit_by_count(
                whole, budget, overhead, partial(self._count, params), long_cache=long_cache
            )
        except (anthropic.APIError, httpx2.TransportError) as err:
            if not self._warned_count:
                self._warned_count = True
                log.warning(
                    "token counting failed, the estimate bounds the request: %s", describe(err)
                )
            return params
        return dataclasses.replace(params, messages=message_params(kept, long_cache=long_cache))

    async def _count(self, params: _Params, messages: list[Block]) -> int:
        """The request as `_open` sends it, counted (the beta endpoint's count is after the
        context edits, which is what the model reads)."""
        if params.context is not None:
            counted = await self._client.beta.messages.count_tokens(
                model=params.model,
                messages=cast("list[BetaMessageParam]", messages),
                system=cast("list[BetaTextBlockParam]", params.system) or anthropic.omit,
                tools=cast("list[BetaToolParam]", params.tools) or anthropic.omit,
                thinking=cast("BetaThinkingConfigParam", params.thinking) or anthropic.omit,
                context_management=cast("BetaContextManagementConfigParam", params.context.param()),
                betas=list(params.context.betas),
            )
            return counted.input_tokens
        plain = await self._client.messages.count_tokens(
            model=params.model,
            messages=cast("list[MessageParam]", messages),
            system=cast("list[TextBlockParam]", params.system) or anthropic.omit,
            tools=cast("list[MessageCountTokensToolParam]", params.tools) or anthropic.omit,
            thinking=cast("ThinkingConfigParam", params.thinking) or anthropic.omit,
        )
        return plain.input_tokens

    def _params(self, request: ModelRequest) -> _Params:
        settings = request.settings
        explicit = settings.model_fields_set
        max_tokens = settings.max_tokens if "max_tokens" in explicit else self._max_tokens
        thinking = settings.thinking if "thinking" in explicit else self._thinking
        model = settings.model or self._model
        long_cache = request.may_wait and self._long_cache and accepts_long_cache(model)
        system = system_blocks(request.system, long_cache=long_cache)
        tools = tool_params(request.tools, long_cache=long_cache)
        context = context_plan(model, self._context_management, self._compact_at_tokens)
        transcript = request_transcript(
            request.messages, context, self._max_context_tokens, estimate_tokens([system, tools])
        )
        if settings.temperature is not None:
            self._skip_temperature(settings.temperature)
        return _Params(
            model=model,
            max_tokens=max_tokens,
            system=system,
            messages=message_params(transcript, long_cache=long_cache, model=model),
            tools=tools,
            thinking=self._thinking_config(max_tokens) if thinking else None,
            context=context,
        )

    def _skip_temperature(self, temperature: float) -> None:
        """The installed SDK's `messages.stream` has no `temperature` parameter, and the API
        version it pins refuses the field as an extra input, so it is never sent. The turn still
        runs; the operator hears why the setting does nothing, once per model."""
        if not self._warned_temperature:
            self._warned_temperature = True
            log.warning(
                "temperature %s is not sent: the Messages API of anthropic %s has no temperature "
                "parameter (remove it from the agent's model settings)",
                temperature,
                anthropic.__version__,
            )

    def _thinking_config(self, max_tokens: int) -> dict[str, Any]:
        """`max_tokens` may be the agent's own, so the budget is checked against it again."""
        if self._thinking_budget is None:
            return {"type": "adaptive"}
        _check_budget(self._thinking_budget, max_tokens)
        return {"type": "enabled", "budget_tokens": self._thinking_budget}


def _check_budget(budget: int, max_tokens: int) -> None:
    """The API's rules for a manual budget; thinking tokens count toward `max_tokens`."""
    if budget < MIN_THINKING_BUDGET:
        raise ModelError(f"thinking_budget ({budget}) must be at least {MIN_THINKING_BUDGET}")
    if budget >= max_tokens:
        raise ModelError(f"thinking_budget ({budget}) must be below max_tokens ({max_tokens})")
