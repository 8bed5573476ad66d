"""What one run of a turn reports as it goes: records to the host's `TurnMeter`, spans to
OpenTelemetry (`agent._tracing`).

The turn loop calls a `TurnWatch` at the moments that matter (a model call starts and returns, a
tool call starts and settles, a step commits, the run ends or parks); the watch times them,
adds up the tokens, and hands each record to the meter and each span to the tracer. Both are
for the host: a meter that raises is logged once and ignored, so it costs its own numbers, never
a turn. Records carry no content; spans carry it only when the runtime was asked to capture it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import INVALID_SPAN, Span

from agent._messages import ToolCall, ToolMessage
from agent._records import StepCommit, TurnStatus
from agent._signals import CancelTurn
from agent._telemetry_seam import (
    LeaseTakeover,
    ModelRun,
    NoMeter,
    StepCommitted,
    StepKind,
    TokenCounts,
    ToolOutcome,
    ToolRun,
    TurnMeter,
    TurnOutcome,
    TurnRun,
)
from agent._tracing import Tracing, end_span, finish_reasons, trace_id_of
from agent._turn_result import TurnResult
from agent.seams import ModelReply, ModelRequest

log = logging.getLogger(__name__)

UNNAMED_MODEL = "default"
"""The model of a call whose agent names none and whose reply did not say (the adapter's own)."""

_OUTCOMES: dict[TurnStatus, TurnOutcome] = {
    TurnStatus.COMPLETED: "completed",
    TurnStatus.SUSPENDED: "suspended",
    TurnStatus.FAILED: "failed",
    TurnStatus.CANCELLED: "cancelled",
}


class ShieldedMeter:
    """The host's meter behind a guard: what it raises is logged (once) and dropped."""

    def __init__(self, meter: TurnMeter) -> None:
        self.meter = meter
        self._warned = False

    def tell(self, method: str, record: object) -> None:
        try:
            getattr(self.meter, method)(record)
        except Exception:
            if not self._warned:
                self._warned = True
                log.exception("the turn meter raised; its records are dropped, turns go on")


class Telemetry:
    """A runtime's meter and tracer, and the watches it makes for each run of a turn."""

    def __init__(self, meter: TurnMeter | None, tracing: Tracing) -> None:
        self.meter = ShieldedMeter(meter if meter is not None else NoMeter())
        self.tracing = tracing

    def watch(self, agent: str, session_key: str, turn_id: str) -> TurnWatch:
        return TurnWatch(self, agent=agent, session_key=session_key, turn_id=turn_id)

    def lease_taken_over(self, session_key: str) -> None:
        self.meter.tell("lease_taken_over", LeaseTakeover(session_key=session_key))


def _tokens(reply: ModelReply) -> TokenCounts:
    usage = reply.usage
    return TokenCounts(
        input=usage.input_tokens,
        output=usage.output_tokens,
        cache_read=usage.cache_read_tokens,
        cache_write=usage.cache_write_tokens,
    )


def _add(a: TokenCounts, b: TokenCounts) -> TokenCounts:
    return TokenCounts(
        input=a.input + b.input,
        output=a.output + b.output,
        cache_read=a.cache_read + b.cache_read,
        cache_write=a.cache_write + b.cache_write,
    )


def step_kind(commit: StepCommit) -> StepKind:
    step = commit.step_id or ""
    if step.startswith("model:"):
        return "model"
    if step.startswith(("tool:", "confirm:")):
        return "tool"
    if commit.turn_status is TurnStatus.RUNNING:
        return "opening"
    return "end"


def error_kind(error: str | None) -> str:
    """The failure's kind from its stored text (`Kind: what happened`), never the text."""
    head = (error or "").split(":", 1)[0].strip()
    return head if head.isidentifier() else "TurnFailure"


@dataclass
class _OpenTool:
    call: ToolCall
    span: Span
    began: float
    deduplicated: bool = False
    refused: bool = False


@dataclass
class _OpenModel:
    span: Span
    began: float
    model: str
    settled: bool = False


@dataclass
class TurnWatch:
    """One run of one turn. Built by the runtime; a quiet one (no meter, no-op tracer) serves
    a turn loop driven without a runtime."""

    telemetry: Telemetry | None
    agent: str = ""
    session_key: str = ""
    turn_id: str = ""
    run: Span = INVALID_SPAN
    began: float = field(default_factory=time.monotonic)
    steps: int = 0
    tokens: TokenCounts = field(default_factory=TokenCounts)
    model: _OpenModel | None = None
    tools: dict[str, _OpenTool] = field(default_factory=dict)
    ended: bool = False

    def _tell(self, method: str, record: object) -> None:
        if self.telemetry is not None:
            self.telemetry.meter.tell(method, record)

    @property
    def trace_id(self) -> str | None:
        return trace_id_of(self.run)

    # the run ------------------------------------------------------------------------------

    @contextmanager
    def running(self) -> Iterator[None]:
        """The run's span, current while the turn runs (what a tool's own spans hang under)."""
        if self.telemetry is not None:
            self.run = self.telemetry.tracing.start_run(self.agent, self.session_key, self.turn_id)
        self.began = time.monotonic()
        try:
            with trace.use_span(
                self.run, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield
        except BaseException as exc:
            self._close_tools("interrupted")
            if not self.ended:
                self.ended = True
                # Store trouble, a lost lease, a shutdown: the turn is not over, another run
                # goes on from its last checkpoint. The span says so; the meter hears nothing.
                end_span(self.run, outcome="interrupted", error=type(exc).__name__)
            raise

    def renewed(self) -> TurnWatch:
        """A watch for another run of the same turn (one that ends it after this one was cut)."""
        if self.telemetry is None:
            return TurnWatch(None)
        return self.telemetry.watch(self.agent, self.session_key, self.turn_id)

    def run_ended(self, result: TurnResult) -> None:
        if self.ended:
            return
        self.ended = True
        self._close_tools("cancelled")
        outcome = _OUTCOMES.get(result.status, "failed")
        error = error_kind(result.error) if outcome == "failed" else None
        record = TurnRun(
            agent=self.agent,
            session_key=self.session_key,
            turn_id=self.turn_id,
            outcome=outcome,
            seconds=time.monotonic() - self.began,
            steps=self.steps,
            tokens=self.tokens,
            trace_id=self.trace_id,
            error=error,
        )
        self._tell("turn_ran", record)
        end_span(self.run, outcome=outcome, error=error)

    # model calls --------------------------------------------------------------------------

    @contextmanager
    def model_call(self, request: ModelRequest) -> Iterator[None]:
        """Around one model call; `model_returned` settles it, anything raised fails it."""
        model = request.settings.model or UNNAMED_MODEL
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.agent.name": self.agent,
            "gen_ai.request.max_tokens": request.settings.max_tokens,
        }
        if request.settings.model:
            attributes["gen_ai.request.model"] = request.settings.model
        tracing = self.telemetry.tracing if self.telemetry is not None else None
        if tracing is not None and tracing.capture_content:
            attributes["gen_ai.system_instructions"] = tracing.content(request.system)
            attributes["gen_ai.input.messages"] = tracing.content(
                [m.model_dump(mode="json") for m in request.messages]
            )
        span = (
            tracing.start_child(self.run, f"chat {model}", attributes) if tracing else INVALID_SPAN
        )
        self.model = _OpenModel(span=span, began=time.monotonic(), model=model)
        try:
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield
        except CancelTurn:
            if not self.model.settled:
                self.model.settled = True
                end_span(span, outcome="cancelled")
            raise
        except BaseException as exc:
            self.model_failed(type(exc).__name__)
            raise

    def model_failed(self, kind: str) -> None:
        open_model = self.model
        if open_model is None or open_model.settled:
            return
        open_model.settled = True
        self._tell(
            "model_called",
            ModelRun(
                agent=self.agent,
                model=open_model.model,
                seconds=time.monotonic() - open_model.began,
                tokens=TokenCounts(),
                stop_reason=None,
                error=kind,
            ),
        )
        end_span(open_model.span, error=kind)

    def model_returned(self, reply: ModelReply) -> None:
        open_model = self.model
        if open_model is None or open_model.settled:
            return
        open_model.settled = True
        if open_model.model == UNNAMED_MODEL and reply.model:
            # the adapter chose the model (its own default): the reply names it
            open_model.model = reply.model
            open_model.span.update_name(f"chat {reply.model}")
        tokens = _tokens(reply)
        self.tokens = _add(self.tokens, tokens)
        self._tell(
            "model_called",
            ModelRun(
                agent=self.agent,
                model=open_model.model,
                seconds=time.monotonic() - open_model.began,
                tokens=tokens,
                stop_reason=reply.stop_reason,
            ),
        )
        span = open_model.span
        if span.is_recording():
            span.set_attributes(
                {
                    "gen_ai.response.model": reply.model or open_model.model,
                    "gen_ai.usage.input_tokens": tokens.input,
                    "gen_ai.usage.output_tokens": tokens.output,
                    "gen_ai.usage.cache_read.input_tokens": tokens.cache_read,
                    "gen_ai.usage.cache_creation.input_tokens": tokens.cache_write,
                    "gen_ai.response.finish_reasons": finish_reasons([reply.stop_reason]),
                }
            )
            tracing = self.telemetry.tracing if self.telemetry is not None else None
            if tracing is not None and tracing.capture_content:
                content = [block.model_dump(mode="json") for block in reply.content]
                span.set_attribute("gen_ai.output.messages", tracing.content(content))
        end_span(span)

    # tool calls ---------------------------------------------------------------------------

    @contextmanager
    def tool_call(self, call: ToolCall) -> Iterator[None]:
        """Around one call of a batch, until its result commits (or it parks, or breaks)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.agent.name": self.agent,
            "gen_ai.tool.name": call.name,
            "gen_ai.tool.call.id": call.id,
            "gen_ai.tool.type": "function",
        }
        tracing = self.telemetry.tracing if self.telemetry is not None else None
        if tracing is not None and tracing.capture_content:
            attributes["gen_ai.tool.call.arguments"] = tracing.content(call.input)
        name = f"execute_tool {call.name}"
        span = tracing.start_child(self.run, name, attributes) if tracing else INVALID_SPAN
        self.tools[call.id] = _OpenTool(call=call, span=span, began=time.monotonic())
        try:
            with trace.use_span(
                span, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ):
                yield
        except CancelTurn:
            self._drop_tool(call.id, "cancelled")
            raise
        except BaseException as exc:
            self._drop_tool(call.id, "interrupted", error=type(exc).__name__)
            raise

    def tool_parked(self, call_id: str) -> None:
        """The call asked a person; the turn parks once its batch is done."""
        self._settle_tool(call_id, "parked")

    def tool_deduplicated(self, step_id: str) -> None:
        """An effect of the call was answered by its receipt instead of running again."""
        open_tool = self.tools.get(step_id.split(":", 2)[-1])
        if open_tool is not None:
            open_tool.deduplicated = True

    def tool_refused(self, call_id: str) -> None:
        """The call names a tool this turn's policy does not offer: its error result is a denial."""
        open_tool = self.tools.get(call_id)
        if open_tool is not None:
            open_tool.refused = True

    def tool_denied(self, tool: str) -> None:
        """A call that never runs: a person declined it, or this turn's policy does not offer it."""
        self._tell("tool_called", ToolRun(agent=self.agent, tool=tool, outcome="denied", seconds=0))

    def _settle_tool(
        self, call_id: str, outcome: ToolOutcome, *, error: str | None = None, result: Any = None
    ) -> float | None:
        open_tool = self.tools.pop(call_id, None)
        if open_tool is None:
            return None
        seconds = time.monotonic() - open_tool.began
        self._tell(
            "tool_called",
            ToolRun(agent=self.agent, tool=open_tool.call.name, outcome=outcome, seconds=seconds),
        )
        tracing = self.telemetry.tracing if self.telemetry is not None else None
        if tracing is not None and tracing.capture_content and open_tool.span.is_recording():
            open_tool.span.set_attribute("gen_ai.tool.call.result", tracing.content(result))
        end_span(open_tool.span, outcome=outcome, error=error)
        return open_tool.began

    def _drop_tool(self, call_id: str, outcome: str, *, error: str | None = None) -> None:
        open_tool = self.tools.pop(call_id, None)
        if open_tool is not None:
            end_span(open_tool.span, outcome=outcome, error=error)

    def _close_tools(self, outcome: str) -> None:
        for call_id in list(self.tools):
            self._drop_tool(call_id, outcome)

    # steps --------------------------------------------------------------------------------

    def committed(self, commit: StepCommit, began: float) -> None:
        """A step is durable: count it, and settle the tool calls whose results it holds."""
        self.steps += 1
        kind = step_kind(commit)
        start = began
        if kind == "model" and self.model is not None:
            start = min(start, self.model.began)
        for _, message in commit.messages:
            if not isinstance(message, ToolMessage) or message.call_id not in self.tools:
                continue
            outcome = _tool_outcome(commit, message, self.tools[message.call_id])
            failed = message.result if isinstance(message.result, dict) else {}
            error = error_kind(str(failed.get("error"))) if message.is_error else None
            settled = self._settle_tool(
                message.call_id, outcome, error=error, result=message.result
            )
            if settled is not None:
                start = min(start, settled)
        self._tell(
            "step_committed",
            StepCommitted(agent=self.agent, kind=kind, seconds=time.monotonic() - start),
        )


def _tool_outcome(commit: StepCommit, message: ToolMessage, call: _OpenTool) -> ToolOutcome:
    if commit.confirmations:
        return "parked"  # proposed for a person to confirm
    if call.refused:
        return "denied"
    if message.is_error:
        return "error"
    return "deduplicated" if call.deduplicated else "ok"


def quiet_watch() -> TurnWatch:
    return TurnWatch(None)
