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
    OutputConfigParam,
    TextBlockParam,
    ThinkingConfigParam,
    ToolParam,
)
from anthropic.types.beta import (
    BetaContextManagementConfigParam,
    BetaMessageParam,
    BetaOutputConfigParam,
    BetaTextBlockParam,
    BetaThinkingConfigParam,
    BetaToolParam,
)

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
    DEFAULT_MODEL,
    MIN_THINKING_BUDGET,
    Block,
    accepts_long_cache,
    estimate_tokens,
    message_params,
    system_blocks,
    tool_params,
)
from agent.models._anthropic_settings import AnthropicSettings
from agent.models._anthropic_streams import opened
from agent.models._family_rules import (
    Requested,
    SettingNames,
    effort_param,
    setting_problems,
    setting_warnings,
    thinking_param,
)
from agent.models._thinking_display import DEFAULT_THINKING_DISPLAY, ThinkingDisplay, with_display
from agent.seams import (
    ModelEvent,
    ModelRequest,
    ModelSettings,
    StreamRestart,
    TextDelta,
    ThinkingDelta,
)

log = logging.getLogger(__name__)


MISSING_KEY = (
    "ANTHROPIC_API_KEY is not set: the Anthropic model needs an API key. Set ANTHROPIC_API_KEY "
    "in the environment, or select the scripted model for offline use."
)
MAX_TOKENS_SETTING = "ANTHROPIC_MAX_TOKENS"
"""Where an operator raises the default `max_tokens`: the same name for the bot and
`AnthropicSettings`, so an error can say it whichever host built this model."""
_MAX_RESTART_DELAY = 8.0
PARAMETERS = SettingNames(
    thinking="thinking", budget="thinking_budget", effort="effort", max_tokens="max_tokens"
)
"""How the constructor's own checks name what they check: its parameters."""


@dataclass(frozen=True, kw_only=True)
class _Params:
    """One request as the SDK takes it; kept whole so a restart sends exactly the same bytes."""

    model: str
    max_tokens: int
    system: list[Block]
    messages: list[Block]
    tools: list[Block]
    thinking: dict[str, Any] | None
    effort: str | None
    context: ContextPlan | None = None
    """Set: the request goes to the beta endpoint with `context_management` and its betas."""


class AnthropicModel:
    """`Model` over `AsyncAnthropic`; pass `client=` to drive a stand-in server in tests.

    Request settings override the constructor's defaults only where they were set explicitly
    (`ModelSettings.model_fields_set`), since `ModelSettings` gives every field a default.
    What each model accepts comes from its family (`agent.models._families`): the constructor
    refuses, at start, a combination its own model would answer with a 400 (a budget where
    thinking is adaptive only, an effort it does not take, `max_tokens` above its maximum);
    a request naming another model is translated into what that model accepts instead, with a
    warning, never refused by the API. Unset, thinking, effort and `max_tokens` are the
    model's own defaults; thinking asked for is adaptive, or manual with `thinking_budget`
    where the family still takes a budget. A long thread is the API's to compact where the
    model's family takes it (`context_management="auto"`, see `_anthropic_context`); otherwise
    `max_context_tokens` bounds the request by the API's token count (see `fit_by_count`).
    A request after which the turn may wait for a person (`ModelRequest.may_wait`) is cached
    with the 1-hour lifetime where the model takes it, unless `long_cache=False`. Thinking text
    streams as `ThinkingDelta` (progress, never the reply); `thinking_display` asks for it where
    the model would send it empty (`agent.models._thinking_display`).
    """

    def __init__(
        self,
        *,
        api_key: str | None = None,
        model: str = DEFAULT_MODEL,
        max_tokens: int | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        thinking: bool | None = None,
        thinking_budget: int | None = None,
        effort: str | None = None,
        thinking_display: ThinkingDisplay | None = DEFAULT_THINKING_DISPLAY,
        max_context_tokens: int | None = None,
        long_cache: bool = True,
        context_management: ContextMode = "auto",
        compact_at_tokens: int | None = None,
        restart_delay: float = 0.5,
        client: anthropic.AsyncAnthropic | None = None,
    ) -> None:
        asked = Requested(
            model=model,
            thinking=thinking,
            budget=thinking_budget,
            effort=effort,
            max_tokens=max_tokens,
        )
        problems = setting_problems(asked, PARAMETERS)
        if problems:
            raise ModelError("; ".join(problems))
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
        self._effort = effort
        self._configured = asked
        self._translated: set[str] = set()
        self._thinking_display = thinking_display
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
        """Raises `ModelError` naming ANTHROPIC_API_KEY when it is missing, or the settings
        the model would refuse, at startup; logs, once, a setting that does nothing on it."""
        asked = Requested(
            model=settings.model,
            thinking=settings.thinking,
            budget=settings.thinking_budget,
            effort=settings.effort,
            max_tokens=settings.max_tokens,
        )
        problems = setting_problems(asked)
        if problems:
            raise ModelError("; ".join(problems))
        for warning in setting_warnings(asked):
            log.warning("%s", warning)
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
            effort=settings.effort,
            thinking_display=settings.thinking_display,
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
                async with opened(self._open(params)) as stream:
                    began = True
                    async for event in stream:
                        if event.type == "text" and event.text:
                            streamed = True
                            yield TextDelta(text=event.text)
                        elif event.type == "thinking" and event.thinking:
                            streamed = True
                            yield ThinkingDelta(text=event.thinking)
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
                output_config=(
                    cast("BetaOutputConfigParam", {"effort": params.effort})
                    if params.effort
                    else anthropic.omit
                ),
            )
        return self._client.messages.stream(
            model=params.model,
            max_tokens=params.max_tokens,
            messages=cast("list[MessageParam]", params.messages),
            system=cast("list[TextBlockParam]", params.system) or anthropic.omit,
            tools=cast("list[ToolParam]", params.tools) or anthropic.omit,
            thinking=cast("ThinkingConfigParam", params.thinking) or anthropic.omit,
            output_config=(
                cast("OutputConfigParam", {"effort": params.effort})
                if params.effort
                else anthropic.omit
            ),
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
        return dataclasses.replace(
            params, messages=message_params(kept, long_cache=long_cache, model=params.model)
        )

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
        model = settings.model or self._model
        asked = Requested(
            model=model,
            thinking=settings.thinking if "thinking" in explicit else self._thinking,
            budget=self._thinking_budget,
            effort=settings.effort or self._effort,
            max_tokens=settings.max_tokens if "max_tokens" in explicit else self._max_tokens,
        )
        max_tokens = self._output_budget(asked)
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
            thinking=with_display(
                self._thinking_config(asked, max_tokens),
                model,
                settings.thinking_display or self._thinking_display,
            ),
            effort=self._effort_config(asked),
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

    def _output_budget(self, asked: Requested) -> int:
        """An agent's `max_tokens` above its model's maximum is lowered to it, with a warning:
        the API would refuse the request."""
        ceiling = asked.family.max_output_tokens
        if asked.output_budget > ceiling:
            self._translate(
                f"max_tokens {asked.output_budget} is above the {ceiling} output tokens "
                f"{asked.model} can write: {ceiling} is sent"
            )
            return ceiling
        return asked.output_budget

    def _thinking_config(self, asked: Requested, max_tokens: int) -> dict[str, Any] | None:
        """Only a config the request's model accepts, with a warning where that is not what
        was asked; `max_tokens` may be the agent's own, so a manual budget is checked again."""
        config = thinking_param(asked)
        kind = (config or {}).get("type")
        if kind == "enabled":
            _check_budget(asked.budget or 0, max_tokens)
        elif asked.thinking and asked.budget is not None:
            self._translate(
                f"thinking_budget is not sent: {asked.model} takes no manual budget (its "
                "thinking is adaptive; effort sets how much)"
            )
        elif asked.thinking and config is None:
            self._translate(f"thinking is not sent: {asked.model} needs a thinking_budget")
        stays_on = asked.family.thinking_default is not None and kind in (None, "adaptive")
        # The constructor's own setting was said at start, by `setting_warnings`.
        if asked.thinking is False and stays_on and asked != self._configured:
            self._translate(f"thinking stays on: {asked.model} cannot turn it off here")
        return config

    def _effort_config(self, asked: Requested) -> str | None:
        effort = effort_param(asked)
        if asked.effort is not None and effort is None:
            self._translate(f"effort {asked.effort} is not sent: {asked.model} does not take it")
        return effort

    def _translate(self, what: str) -> None:
        """A request changed to fit its model: said once per kind, not at every step."""
        if what not in self._translated:
            self._translated.add(what)
            log.warning("%s", what)


def _check_budget(budget: int, max_tokens: int) -> None:
    """The API's rules for a manual budget; thinking tokens count toward `max_tokens`."""
    if budget < MIN_THINKING_BUDGET:
        raise ModelError(f"thinking_budget ({budget}) must be at least {MIN_THINKING_BUDGET}")
    if budget >= max_tokens:
        raise ModelError(f"thinking_budget ({budget}) must be below max_tokens ({max_tokens})")
