"""One turn, driven step by step off the transcript.

Each step commits atomically with its message and events; the loop's position is re-derived from
the transcript every time round, so the same code path serves a fresh turn, a replay after a crash
and a turn resumed on another worker. Nothing here persists a live token.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent.agent_def import Agent
from agent.errors import (
    AbnormalStopError,
    FatalToolError,
    ModelError,
    ToolError,
    UnknownToolError,
)
from agent.events import (
    ActionCompleted,
    ActionRequested,
    MessageCompleted,
    MessageDelta,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnStarted,
)
from agent.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    TriggerMessage,
    Usage,
    UserMessage,
)
from agent.seams import (
    EventSink,
    Lease,
    ModelReply,
    ModelRequest,
    SessionStatus,
    SessionStore,
    StepCommit,
    StoreHandle,
    StreamRestart,
    TextDelta,
    TurnRecord,
    TurnStatus,
)
from agent.signals import CancellationSignal
from agent.tool_context import ToolContext
from agent.tools import Tool, describe_error, to_json_value
from agent.turn_result import TurnResult

log = logging.getLogger(__name__)

NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence"})


class _NoHandle:
    """A remote tool runs outside the step's transaction, so it gets no handle to write through."""

    def unwrap(self) -> Any:
        raise ToolError(
            "only a local (def) tool can use the store handle: an async tool runs outside the "
            "step's transaction"
        )


@dataclass(kw_only=True)
class TurnEnv:
    """What a turn runs against; built by the runtime for each lease it holds."""

    agent: Agent
    store: SessionStore
    model: Any
    sink: EventSink
    lease: Lease
    ttl: float
    clock: Callable[[], float]


class TurnRunner:
    def __init__(self, env: TurnEnv, turn: TurnRecord, transcript: list[Message]) -> None:
        self.env = env
        self.turn = turn
        self.session = turn.session
        self.turn_id = turn.turn_id
        self.transcript = transcript
        self.cancellation = CancellationSignal()

    async def run(self) -> TurnResult:
        """Run (or replay) the turn until it ends; raises only store trouble and lost leases."""
        try:
            if not self._has_opening():
                await self._commit_opening()
            while True:
                position = self._position()
                if position is None:
                    finished = await self._model_step()
                    if finished is not None:
                        return finished
                    continue
                anchor, outstanding = position
                for call in outstanding:
                    await self._tool_step(anchor, call)
        except _TurnFailed as failed:
            return await self._fail(failed.message)

    # position -----------------------------------------------------------------------------

    def _has_opening(self) -> bool:
        for message in reversed(self.transcript):
            if message.turn_id != self.turn_id:
                return False
            if isinstance(message, UserMessage | TriggerMessage):
                return True
        return False

    def _position(self) -> tuple[int, list[ToolCall]] | None:
        """None → the model is owed a step; else the assistant index and its unanswered calls."""
        answered: set[str] = set()
        for index in range(len(self.transcript) - 1, -1, -1):
            message = self.transcript[index]
            if isinstance(message, ToolMessage):
                answered.add(message.call_id)
                continue
            if isinstance(message, AssistantMessage):
                outstanding = [c for c in message.tool_calls if c.id not in answered]
                return (index, outstanding) if outstanding else None
            return None
        return None

    def _turn_usage(self, extra: Usage) -> Usage:
        total = extra
        for message in reversed(self.transcript):
            if message.turn_id != self.turn_id:
                break
            if isinstance(message, AssistantMessage):
                total = total + message.usage
        return total

    # commits ------------------------------------------------------------------------------

    async def _commit(self, commit: StepCommit) -> None:
        env = self.env
        events = await env.store.commit(env.lease, commit, env.ttl, env.clock())
        self._applied(commit)
        await self._publish(events)

    def _applied(self, commit: StepCommit) -> None:
        for index, message in commit.messages:
            assert index == len(self.transcript), "transcript out of step with the store"
            self.transcript.append(message)

    async def _publish(self, events: Sequence[TurnEvent]) -> None:
        for event in events:
            await self.env.sink.emit(event)

    async def _commit_opening(self) -> None:
        data = self.turn.input
        opening: Message
        if data.trigger is not None:
            opening = TriggerMessage(
                turn_id=self.turn_id, text=data.text, by=data.trigger.by, kind=data.trigger.kind
            )
        else:
            speaker = data.inbound.user.id if data.inbound and data.inbound.user else None
            opening = UserMessage(turn_id=self.turn_id, text=data.text, by=speaker)
        started = TurnStarted(
            session=self.session, turn_id=self.turn_id, text=data.text, source=data.source
        )
        await self._commit(
            StepCommit(
                turn_id=self.turn_id,
                messages=[(len(self.transcript), opening)],
                events=[started],
                turn_status=TurnStatus.RUNNING,
                session_status=SessionStatus.RUNNING,
            )
        )

    async def _fail(self, message: str) -> TurnResult:
        result = TurnResult(turn_id=self.turn_id, status=TurnStatus.FAILED, error=message)
        await self._commit(
            StepCommit(
                turn_id=self.turn_id,
                events=[TurnFailed(session=self.session, turn_id=self.turn_id, error=message)],
                turn_status=TurnStatus.FAILED,
                turn_result=result.to_json(),
                session_status=SessionStatus.IDLE,
            )
        )
        return result

    # model step ---------------------------------------------------------------------------

    def _request(self) -> ModelRequest:
        agent = self.env.agent
        return ModelRequest(
            system=agent.instructions,
            messages=tuple(self.transcript),
            tools=tuple(t.spec for t in agent.tools),
            settings=agent.model,
        )

    async def _stream_reply(self) -> ModelReply:
        reply: ModelReply | None = None
        try:
            async for event in self.env.model.stream(self._request()):
                if isinstance(event, TextDelta):
                    await self.env.sink.emit(
                        MessageDelta(session=self.session, turn_id=self.turn_id, text=event.text)
                    )
                elif isinstance(event, StreamRestart):
                    await self.env.sink.emit(
                        MessageDelta(
                            session=self.session, turn_id=self.turn_id, text="", restart=True
                        )
                    )
                else:
                    reply = event
        except ModelError as exc:
            raise _TurnFailed(describe_error(exc)) from None
        except Exception as exc:
            log.exception("model adapter raised an unmapped error")
            raise _TurnFailed(describe_error(ModelError(str(exc) or type(exc).__name__))) from None
        if reply is None:
            raise _TurnFailed("ModelError: the model stream ended without a reply")
        return reply

    async def _model_step(self) -> TurnResult | None:
        """Commit one model step; returns the result when the reply ends the turn."""
        index = len(self.transcript)
        reply = await self._stream_reply()
        message = AssistantMessage(
            turn_id=self.turn_id,
            content=reply.content,
            stop_reason=reply.stop_reason,
            usage=reply.usage,
        )
        if reply.stop_reason not in NORMAL_STOPS and not message.text and not message.tool_calls:
            error = AbnormalStopError(
                f"the model stopped with {reply.stop_reason!r} and an empty reply"
            )
            raise _TurnFailed(describe_error(error))
        events: list[TurnEvent] = [
            MessageCompleted(
                session=self.session, turn_id=self.turn_id, index=index, text=message.text
            )
        ]
        events += [
            ActionRequested(session=self.session, turn_id=self.turn_id, call=call)
            for call in message.tool_calls
        ]
        step = StepCommit(
            turn_id=self.turn_id,
            step_id=f"model:{index}",
            step_value={"stop_reason": reply.stop_reason},
            messages=[(index, message)],
            events=events,
        )
        if message.tool_calls:
            await self._commit(step)
            return None
        usage = self._turn_usage(reply.usage)
        result = TurnResult(
            turn_id=self.turn_id, status=TurnStatus.COMPLETED, text=message.text, usage=usage
        )
        events.append(
            TurnCompleted(
                session=self.session, turn_id=self.turn_id, text=message.text, usage=usage
            )
        )
        await self._commit(
            StepCommit(
                turn_id=step.turn_id,
                step_id=step.step_id,
                step_value=step.step_value,
                messages=step.messages,
                events=events,
                turn_status=TurnStatus.COMPLETED,
                turn_result=result.to_json(),
                session_status=SessionStatus.IDLE,
            )
        )
        return result

    # tool step ----------------------------------------------------------------------------

    def _context(self, call: ToolCall, tool: Tool, handle: StoreHandle) -> ToolContext:
        inbound = self.turn.input.inbound
        return ToolContext(
            store=handle,
            session=self.session,
            turn_id=self.turn_id,
            call_id=call.id,
            tool_name=tool.name,
            user=inbound.user if inbound else None,
            inbound=inbound,
            cancellation=self.cancellation,
            local=tool.local,
        )

    def _tool_commit(
        self, anchor: int, call: ToolCall, value: Any, error: str | None
    ) -> StepCommit:
        result = {"error": error} if error is not None else value
        message = ToolMessage(
            turn_id=self.turn_id,
            call_id=call.id,
            name=call.name,
            result=result,
            is_error=error is not None,
        )
        event = ActionCompleted(
            session=self.session,
            turn_id=self.turn_id,
            call_id=call.id,
            name=call.name,
            result=None if error is not None else value,
            error=error,
        )
        return StepCommit(
            turn_id=self.turn_id,
            step_id=f"tool:{anchor}:{call.id}",
            step_value=result,
            messages=[(len(self.transcript), message)],
            events=[event],
        )

    async def _tool_step(self, anchor: int, call: ToolCall) -> None:
        tool = self.env.agent.tool_named(call.name)
        if tool is None:
            error = describe_error(UnknownToolError(f"no tool named {call.name!r}"))
            await self._commit(self._tool_commit(anchor, call, None, error))
            return
        try:
            arguments = tool.parse_input(call.input)
        except Exception as exc:
            await self._commit(self._tool_commit(anchor, call, None, describe_error(exc)))
            return
        if tool.local:
            await self._local_tool(anchor, call, tool, arguments)
        else:
            await self._remote_tool(anchor, call, tool, arguments)

    async def _local_tool(
        self, anchor: int, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> None:
        def run(handle: StoreHandle) -> Any:
            try:
                outcome = tool.call(arguments, self._context(call, tool, handle))
                if inspect.isawaitable(outcome):
                    if inspect.iscoroutine(outcome):
                        outcome.close()
                    raise TypeError(
                        f"tool {tool.name!r} is declared with `def` but returned an awaitable; "
                        "declare it `async def` so the engine awaits it"
                    )
                return to_json_value(outcome)
            except FatalToolError:
                raise
            except Exception as exc:
                raise _ToolRaised(exc) from exc

        env = self.env

        def build(value: Any) -> StepCommit:
            return self._tool_commit(anchor, call, value, None)

        try:
            value, events = await env.store.commit_local(
                env.lease, run, build, env.ttl, env.clock()
            )
        except FatalToolError as exc:
            raise _TurnFailed(describe_error(exc)) from None
        except _ToolRaised as raised:
            # its writes were rolled back with the transaction; the model reads the error
            error = describe_error(raised.original)
            await self._commit(self._tool_commit(anchor, call, None, error))
            return
        self._applied(build(value))
        await self._publish(events)

    async def _remote_tool(
        self, anchor: int, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> None:
        try:
            value = to_json_value(
                await tool.call(arguments, self._context(call, tool, _NoHandle()))
            )
        except FatalToolError as exc:
            raise _TurnFailed(describe_error(exc)) from None
        except Exception as exc:
            await self._commit(self._tool_commit(anchor, call, None, describe_error(exc)))
            return
        await self._commit(self._tool_commit(anchor, call, value, None))


class _TurnFailed(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _ToolRaised(Exception):
    """Carries a local tool's own exception through the store, apart from the store's failures."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original
