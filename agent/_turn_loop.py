"""One turn, driven step by step off the transcript.

Each step commits atomically with its message and events; the loop's position is re-derived from
the transcript every time round, so the same code path serves a fresh turn, a replay after a crash,
a turn resumed after a person answered, and a turn picked up by another worker. Nothing here
persists a live token. Cancellation is checked only at checkpoint boundaries.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agent._events import (
    ActionRequested,
    InputRequested,
    MessageCompleted,
    TurnCancelled,
    TurnCompleted,
    TurnEvent,
    TurnFailed,
    TurnStarted,
)
from agent._hitl_requests import InputRequest, parked_requests
from agent._messages import (
    AssistantMessage,
    JsonValue,
    Message,
    ToolCall,
    ToolMessage,
    TranscriptView,
    TriggerMessage,
    UserMessage,
)
from agent._model_stream import model_stream
from agent._parking import park_checkpoint
from agent._policy import TurnPolicy
from agent._reply_checks import refused
from agent._reply_stream import stream_reply
from agent._signals import CancellationSignal, CancelTurn, ParkTurn
from agent._stops import PAUSE_TURN, continued_text, declined_line, kept_content
from agent._tool_batch import in_call_order, place_result, run_batch
from agent._tool_steps import ToolStepRunner, TurnFailure
from agent._tool_values import describe_error
from agent._turn_env import TurnEnv
from agent._turn_outcome import empty_reply_note, said_so_far, turn_usage
from agent._turn_result import TurnResult
from agent.seams import (
    CancelReason,
    ModelRequest,
    SessionStatus,
    StepCommit,
    TurnRecord,
    TurnStatus,
)

__all__ = ["TurnEnv", "TurnRunner", "model_stream"]

log = logging.getLogger(__name__)


class TurnRunner:
    def __init__(
        self, env: TurnEnv, turn: TurnRecord, transcript: list[Message], base: int = 0
    ) -> None:
        self.env = env
        self.turn = turn
        self.session = turn.session
        self.turn_id = turn.turn_id
        self.transcript = in_call_order(transcript)
        """The recent end of the session's transcript (from a turn's opening): what the model
        sees, each batch's results in call order. Message indexes and the step ids keyed by them
        are absolute: `base` + position."""
        self.base = base
        self.cancellation = CancellationSignal()
        if turn.cancel_reason:
            self.cancellation.cancel(turn.cancel_reason)
        self.steps: dict[str, JsonValue] = {}
        self.policy = env.agent.policy_for(turn.input.source)
        self._commits = asyncio.Lock()
        """One commit at a time: a batch's calls finish side by side (`agent._tool_batch`)."""

    async def run(self) -> TurnResult:
        """Run (or replay) the turn until it ends or parks; raises only store trouble."""
        if self._may_have_steps():
            self.steps = await self.env.store.load_steps(self.session, self.turn_id)
        saved = self._saved_policy()
        if saved is not None:
            self.policy = saved
        tools = ToolStepRunner(self)
        try:
            self.checkpoint()
            if not self._has_opening():
                await self._commit_opening()
            await tools.plan_confirmed_call()
            while True:
                position = self._position()
                if position is None:
                    self.checkpoint()
                    finished = await self._model_step()
                    if finished is not None:
                        return finished
                    continue
                anchor, outstanding = position
                await run_batch(tools, anchor, outstanding)
        except CancelTurn as cancel:
            return await self._cancel(cancel.reason)
        except ParkTurn as park:
            return await self._park(park.parks)
        except TurnFailure as failed:
            return await self._fail(failed.message)

    def _may_have_steps(self) -> bool:
        """A step is written only after the turn's opening commit (a step's own commit, or the
        answer to a park the turn made), and an unfinished turn's messages end the transcript,
        its opening included. So a turn neither opened here nor stamped with the fingerprint
        its opening records has no steps to read: one read fewer for every new turn."""
        return self._has_opening() or self.turn.fingerprint is not None

    @property
    def next_index(self) -> int:
        """The index the session's next message gets."""
        return self.base + len(self.transcript)

    def checkpoint(self) -> None:
        """A boundary where a requested cancellation takes effect."""
        if self.cancellation.cancelled:
            raise CancelTurn(self.cancellation.reason or CancelReason.CANCELLED)

    # position -----------------------------------------------------------------------------

    def _has_opening(self) -> bool:
        for message in reversed(self.transcript):
            if message.turn_id != self.turn_id:
                return False
            if isinstance(message, UserMessage | TriggerMessage):
                return True
        return False

    def turn_messages(self) -> list[Message]:
        tail: list[Message] = []
        for message in reversed(self.transcript):
            if message.turn_id != self.turn_id:
                break
            tail.append(message)
        return tail[::-1]

    def _position(self) -> tuple[int, list[ToolCall]] | None:
        """None → the model is owed a step; else the assistant index and its unanswered calls."""
        answered: set[str] = set()
        for position in range(len(self.transcript) - 1, -1, -1):
            message = self.transcript[position]
            index = self.base + position
            if isinstance(message, ToolMessage):
                answered.add(message.call_id)
                continue
            if isinstance(message, AssistantMessage) and message.turn_id == self.turn_id:
                outstanding = [c for c in message.tool_calls if c.id not in answered]
                return (index, outstanding) if outstanding else None
            return None
        return None

    def _saved_policy(self) -> TurnPolicy | None:
        for step_id, value in self.steps.items():
            if step_id.startswith("park:") and isinstance(value, dict) and value.get("policy"):
                return TurnPolicy.from_json(value["policy"])
        return None

    def parked_call_ids(self) -> set[str]:
        return {
            request.call_id
            for step_id, value in self.steps.items()
            if step_id.startswith("park:")
            for request in parked_requests(value)
        }

    # commits ------------------------------------------------------------------------------

    async def commit(self, commit: StepCommit) -> None:
        env = self.env
        async with self._commits:
            if commit.messages and commit.messages[0][0] != self.next_index:
                # Built while a sibling call committed: its messages go where the next ones do.
                start = self.next_index
                numbered = [(start + n, m) for n, (_, m) in enumerate(commit.messages)]
                commit = replace(commit, messages=numbered)
            began = time.monotonic()
            events = await env.store.commit(env.lease, commit, env.ttl, env.clock())
            env.watch.committed(commit, began)
            self.applied(commit)
            await self.publish(events)

    async def run_local(
        self, run: Callable[[Any], Any], build: Callable[[Any], StepCommit]
    ) -> None:
        """A local tool's step: `run` inside the store's transaction, its commit `build` from
        the value, under the same one-at-a-time rule as `commit` (`build` reads the index)."""
        env = self.env
        async with self._commits:
            began = time.monotonic()
            value, events = await env.store.commit_local(
                env.lease, run, build, env.ttl, env.clock()
            )
            done = build(value)
            env.watch.committed(done, began)
            self.applied(done)
            await self.publish(events)

    def applied(self, commit: StepCommit) -> None:
        for index, message in commit.messages:
            assert index == self.next_index, "transcript out of step with the store"
            self.transcript.append(message)
            if isinstance(message, ToolMessage):
                place_result(self.transcript)  # the model reads a batch in call order
        if commit.step_id is not None:
            self.steps[commit.step_id] = commit.step_value

    async def publish(self, events: Sequence[TurnEvent]) -> None:
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
        await self.commit(
            StepCommit(
                turn_id=self.turn_id,
                messages=[(self.next_index, opening)],
                events=[started],
                turn_status=TurnStatus.RUNNING,
                session_status=SessionStatus.RUNNING,
                turn_fingerprint=self.env.agent.fingerprint,
            )
        )

    async def _end(
        self,
        result: TurnResult,
        event: TurnEvent,
        *,
        messages: Sequence[tuple[int, Message]] = (),
    ) -> TurnResult:
        await self.commit(
            StepCommit(
                turn_id=self.turn_id,
                events=[event],
                turn_status=result.status,
                turn_result=result.to_json(),
                session_status=SessionStatus.IDLE,
                messages=messages,
            )
        )
        return result

    async def fail(self, message: str) -> TurnResult:
        """End the turn as failed (what the runtime does with a step that cannot be saved)."""
        return await self._fail(message)

    async def _fail(self, message: str) -> TurnResult:
        message = self.env.redact(message)  # every failure passes here: the one place to scrub
        result = self._unfinished(TurnStatus.FAILED, error=message)
        event = TurnFailed(session=self.session, turn_id=self.turn_id, error=message)
        return await self._end(result, event)

    async def _cancel(self, reason: str) -> TurnResult:
        """Calls of the batch that never ran get `{"cancelled": true}`, so the transcript stays
        valid for the next model call; what committed stays committed."""
        messages: list[tuple[int, Message]] = []
        position = self._position() if self._has_opening() else None
        if position is not None:
            for call in position[1]:
                messages.append(
                    (
                        self.next_index + len(messages),
                        ToolMessage(
                            turn_id=self.turn_id,
                            call_id=call.id,
                            name=call.name,
                            result={"cancelled": True},
                        ),
                    )
                )
        # The durable request says who asked and why; a signal that got here first carries
        # only a reason (a stop by a person is read back, so its `by` can be shown).
        asked = await self.env.store.get_turn(self.session, self.turn_id)
        by = None
        if asked is not None and asked.cancel_reason:
            reason, by = asked.cancel_reason, asked.cancelled_by
        result = self._unfinished(TurnStatus.CANCELLED, reason=reason)
        event = TurnCancelled(session=self.session, turn_id=self.turn_id, reason=reason, by=by)
        return await self._end(result, event, messages=messages)

    def _unfinished(
        self,
        status: TurnStatus,
        *,
        error: str | None = None,
        reason: str | None = None,
        requests: Sequence[InputRequest] = (),
    ) -> TurnResult:
        """The result of a turn that ends (or parks) without a last reply: what the model said
        in it so far, and the tokens its model steps used (`agent._turn_outcome`)."""
        said = self.turn_messages()
        return TurnResult(
            turn_id=self.turn_id,
            status=status,
            text=said_so_far(said),
            error=error,
            reason=reason,
            request=requests[0] if requests else None,
            requests=tuple(requests),
            usage=turn_usage(said),
        )

    async def _park(self, parks: Sequence[ParkTurn]) -> TurnResult:
        """One suspended checkpoint holding every request of the batch (`agent._parking`)."""
        requests, checkpoint, timers = park_checkpoint(
            self.turn, self.policy, parks, self.env.clock()
        )
        result = self._unfinished(TurnStatus.SUSPENDED, requests=requests)
        events: list[TurnEvent] = [
            InputRequested(session=self.session, turn_id=self.turn_id, request=request)
            for request in requests
        ]
        await self.commit(
            StepCommit(
                turn_id=self.turn_id,
                step_id=f"park:{self.turn_id}:{requests[0].id}",
                step_value=checkpoint,
                events=events,
                turn_status=TurnStatus.SUSPENDED,
                turn_result=result.to_json(),
                session_status=SessionStatus.SUSPENDED,
                set_pending=True,
                pending=checkpoint,
                timers=timers,
            )
        )
        return result

    # model step ---------------------------------------------------------------------------

    def request(self) -> ModelRequest:
        agent = self.env.agent
        specs = []
        may_wait = False
        for name in self.policy.tools:
            found = agent.tool_named(name)
            if found is not None:
                specs.append(found.spec)
                may_wait = may_wait or found.may_ask
        return ModelRequest(
            system=self.policy.system,
            messages=TranscriptView(self.transcript),
            tools=tuple(specs),
            settings=agent.model,
            may_wait=may_wait,
        )

    async def _model_step(self) -> TurnResult | None:
        """Commit one model step; returns the result when the reply ends the turn (a paused
        reply does not: `agent._stops`)."""
        index = self.next_index
        reply = await stream_reply(self)
        message = AssistantMessage(
            turn_id=self.turn_id,
            content=kept_content(reply),
            stop_reason=reply.stop_reason,
            usage=reply.usage,
            model=reply.model,
        )
        said = self.turn_messages()
        refusal = refused(reply.stop_reason, message, said)
        if refusal is not None:
            raise TurnFailure(describe_error(refusal, redact=self.env.redact))
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
        if message.tool_calls or reply.stop_reason == PAUSE_TURN:  # the turn goes on
            await self.commit(step)
            return None
        usage = turn_usage(said, reply.usage)
        text = continued_text(said, message)
        declined = declined_line(reply)
        note = declined or (None if text.strip() else empty_reply_note(said, self.turn.input))
        result = TurnResult(
            turn_id=self.turn_id, status=TurnStatus.COMPLETED, text=text, usage=usage, note=note
        )
        completed = TurnCompleted(
            session=self.session, turn_id=self.turn_id, text=text, usage=usage, declined=declined
        )
        await self.commit(
            replace(
                step,
                events=[*events, completed],
                turn_status=TurnStatus.COMPLETED,
                turn_result=result.to_json(),
                session_status=SessionStatus.IDLE,
            )
        )
        return result
