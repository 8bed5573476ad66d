"""The `ANTHROPIC_*` settings' checks (see `tests.bot.setting_checks`): each one is found in
the request the model the bot builds sends to the Anthropic stand-in."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent import AssistantMessage, ModelError, ModelSettings, TextBlock, UserMessage
from agent.models import DEFAULT_MODEL, family_of
from agent.seams import ModelRequest
from bot.app import build_model
from bot.core.settings import Settings
from tests.bot.setting_context import KEY, Ctx, hello
from tests.support.anthropic_standin import http_error


async def anthropic_key(ctx: Ctx) -> None:
    await ctx.sent()
    assert (await ctx.anthropic()).requests[-1].credential == KEY


async def anthropic_base_url(ctx: Ctx) -> None:
    await ctx.sent()
    assert len((await ctx.anthropic()).requests) == 1


async def anthropic_model(ctx: Ctx) -> None:
    ctx.set(ANTHROPIC_MODEL="claude-haiku-4-5")
    assert (await ctx.sent())["model"] == "claude-haiku-4-5"


async def anthropic_max_tokens(ctx: Ctx) -> None:
    """Unset: the default model's family budget (`ModelFamily.default_max_tokens`)."""
    assert (await ctx.sent())["max_tokens"] == family_of(DEFAULT_MODEL).default_max_tokens
    ctx.set(ANTHROPIC_MAX_TOKENS="1234")
    assert (await ctx.sent())["max_tokens"] == 1234


async def anthropic_thinking(ctx: Ctx) -> None:
    """Unset: the model's default (nothing sent); on: adaptive; off: the default model's lowest
    setting, `between_tools`, since it refuses "disabled". Its progress display is left at the
    model's own (omitted), so only this setting shapes `thinking`."""
    ctx.set(ANTHROPIC_THINKING_DISPLAY="omitted")
    assert "thinking" not in await ctx.sent()
    ctx.set(ANTHROPIC_THINKING="true")
    assert (await ctx.sent())["thinking"] == {"type": "adaptive"}
    ctx.set(ANTHROPIC_THINKING="false")
    assert (await ctx.sent())["thinking"] == {"type": "between_tools"}


async def anthropic_thinking_budget(ctx: Ctx) -> None:
    """A manual budget, on a model that still takes one (the default model's is adaptive)."""
    ctx.set(
        ANTHROPIC_MODEL="claude-sonnet-4-6",
        ANTHROPIC_THINKING="true",
        ANTHROPIC_MAX_TOKENS="8000",
        ANTHROPIC_THINKING_BUDGET="2048",
    )
    assert (await ctx.sent())["thinking"] == {"type": "enabled", "budget_tokens": 2048}


async def anthropic_effort(ctx: Ctx) -> None:
    """Unset: none sent, the model's default effort; set: `output_config.effort`."""
    assert "output_config" not in await ctx.sent()
    ctx.set(ANTHROPIC_EFFORT="low")
    assert (await ctx.sent())["output_config"] == {"effort": "low"}


async def anthropic_thinking_display(ctx: Ctx) -> None:
    """Unset, a model that omits its thinking unless asked is asked for the summary (the
    progress between tool calls); "omitted" asks for nothing there, and is sent where the
    model's own default is the summary."""
    ctx.set(ANTHROPIC_MODEL="claude-opus-5-5")
    assert (await ctx.sent())["thinking"] == {"type": "adaptive", "display": "summarized"}
    ctx.set(ANTHROPIC_THINKING_DISPLAY="omitted")
    assert "thinking" not in await ctx.sent()
    ctx.set(ANTHROPIC_MODEL="claude-sonnet-4-6", ANTHROPIC_THINKING="true")  # shows by default
    assert (await ctx.sent())["thinking"] == {"type": "adaptive", "display": "omitted"}


async def anthropic_timeout(ctx: Ctx) -> None:
    ctx.set(ANTHROPIC_TIMEOUT_SECONDS="42.5")
    await ctx.sent()
    assert (await ctx.anthropic()).requests[-1].headers["x-stainless-read-timeout"] == "42.5"


async def anthropic_max_retries(ctx: Ctx) -> None:
    """One retry of a refused request, not the default two."""
    api = await ctx.anthropic()
    ctx.set(ANTHROPIC_API_KEY=KEY, ANTHROPIC_MAX_RETRIES="1")
    api.enqueue(*(http_error(529, "overloaded_error") for _ in range(3)))
    model = await asyncio.to_thread(build_model, Settings())  # the SDK's first import
    try:
        with pytest.raises(ModelError, match="overloaded_error"):
            async for _ in model.stream(hello()):
                pass
    finally:
        await model.aclose()  # type: ignore[attr-defined]
    assert len(api.requests) == 2


async def anthropic_max_context_tokens(ctx: Ctx) -> None:
    """A long thread is trimmed to its newest exchanges (the stored transcript is not), for a
    model the API does not compact for (the default model compacts: see the next check)."""
    ctx.set(ANTHROPIC_MODEL="claude-sonnet-4-5")
    long = "word " * 2000  # about 2,500 tokens by the chars / 4 estimate
    history = []
    for n in range(3):
        history += [
            UserMessage(turn_id=f"t{n}", text=f"question {n}: {long}"),
            AssistantMessage(
                turn_id=f"t{n}", content=(TextBlock(text=f"answer {n}"),), stop_reason="end_turn"
            ),
        ]
    request = ModelRequest(
        system="",
        messages=(*history, UserMessage(turn_id="t3", text="the latest question")),
        settings=ModelSettings(),
    )
    assert len((await ctx.sent(request))["messages"]) == 7, "unset: nothing is trimmed"
    ctx.set(ANTHROPIC_MAX_CONTEXT_TOKENS="3000")
    sent = (await ctx.sent(request))["messages"]
    assert len(sent) == 3
    assert "question 2" in sent[0]["content"][0]["text"]


async def anthropic_long_cache(ctx: Ctx) -> None:
    """Off, a request after which a person may be waited on keeps the 5-minute lifetime."""

    def lifetimes(body: dict[str, Any]) -> set[str | None]:
        blocks = [b for m in body["messages"] for b in m["content"] if "cache_control" in b]
        return {b["cache_control"].get("ttl") for b in blocks}

    assert lifetimes(await ctx.sent(hello(may_wait=True))) == {"1h"}
    ctx.set(ANTHROPIC_LONG_CACHE="false")
    assert lifetimes(await ctx.sent(hello(may_wait=True))) == {None}


async def anthropic_context_management(ctx: Ctx) -> None:
    """On by default where the model's family takes it; off, the request is the plain one."""
    ctx.set(ANTHROPIC_MODEL="claude-opus-5-5")
    assert (await ctx.sent())["context_management"] == {"edits": [{"type": "compact_20260112"}]}
    ctx.set(ANTHROPIC_CONTEXT_MANAGEMENT="off")
    assert "context_management" not in await ctx.sent()


async def anthropic_compact_at_tokens(ctx: Ctx) -> None:
    ctx.set(ANTHROPIC_MODEL="claude-opus-5-5", ANTHROPIC_COMPACT_AT_TOKENS="80000")
    [edit] = (await ctx.sent())["context_management"]["edits"]
    assert edit["trigger"] == {"type": "input_tokens", "value": 80000}
