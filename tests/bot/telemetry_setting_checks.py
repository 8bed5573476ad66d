"""The tracing setting's check (see `tests.bot.setting_checks`):
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` reaches the bot's runtime, whose spans then
carry the turn's messages; unset, the same turn's spans carry none."""

from __future__ import annotations

import json

from tests.bot.setting_context import Ctx
from tests.support.spans import Spans, attrs, everything_said

PROMPT = "what is on the capture-check menu"


async def _chat_spans(ctx: Ctx, session: str) -> Spans:
    spans = Spans()
    ctx.stack.callback(spans.close)
    bot = await ctx.bot(runtime_options={"tracer_provider": spans.provider})
    result = await bot.runtime.session(bot.agent, session).turn(PROMPT)
    assert result.text == "ok"
    assert spans.named("chat"), "the turn's model call made no span"
    return spans


async def capture_content(ctx: Ctx) -> None:
    unset = await _chat_spans(ctx, "check:otel-unset")
    assert PROMPT not in everything_said(unset.all())
    ctx.set(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
    captured = await _chat_spans(ctx, "check:otel-set")
    [chat] = captured.named("chat")
    sent = json.loads(attrs(chat)["gen_ai.input.messages"])
    assert PROMPT in sent[-1]["text"]
