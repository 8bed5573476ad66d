"""Tool steps: one call of the model's batch, run under the guarantee its declaration implies,
its result committed with its message and events. Also the confirmation flow for write tools:
a `confirmation="required"` call is recorded for a person instead of being run; a
`confirmation="capability"` tool runs and records its own request
(`agent._hitl_capability_confirmation`). Either way the turn acting on an accepted answer runs
the stored call again with its stored arguments.
"""

from __future__ import annotations

import inspect
import json
import logging
from typing import Any

from agent._confirmation_requests import confirmation_request
from agent._effects import EffectCoordinator
from agent._errors import (
    FatalToolError,
    RequestExpiredError,
    StoreUnavailableError,
    ToolError,
    UnknownToolError,
)
from agent._events import ActionCompleted, ActionRequested, ConfirmationRequested
from agent._facts import FactsView
from agent._hitl_answerers import QuorumAnswerer
from agent._hitl_automatic import approved_by_policy, policy_answer, policy_note
from agent._hitl_capability_confirmation import Consent, NeedsConfirmation, details_json
from agent._hitl_checks import default_answerers
from agent._messages import AssistantMessage, ToolCall, ToolMessage
from agent._redaction import is_database_error
from agent._tool_context import ToolContext
from agent._tool_turn import ToolTurn
from agent._tool_values import database_error_detail, describe_error, to_json_value
from agent._tools import Tool
from agent._turn_input import ConfirmationAnswer
from agent.seams import (
    ApprovalTimer,
    ConfirmationRecord,
    FactRecord,
    StepCommit,
    StoreHandle,
    TimerKind,
)

log = logging.getLogger(__name__)


class TurnFailure(Exception):
    """Ends the turn as failed with a message fit for the model's and the user's eyes."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _ToolRaised(Exception):
    """Carries a local tool's own exception through the store, apart from the store's failures."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original


class _NoHandle:
    """A remote tool runs outside the step's transaction, so it gets no handle to write through."""

    def unwrap(self) -> Any:
        raise ToolError(
            "only a local (def) tool can use the store handle: an async tool runs outside the "
            "step's transaction"
        )


def confirmed_call_id(call_id: str) -> str:
    return f"{call_id}_confirmed"


class ToolStepRunner:
    def __init__(self, turn: ToolTurn) -> None:
        self.turn = turn

    # the confirmation follow-up ------------------------------------------------------------

    async def plan_confirmed_call(self) -> None:
        """In the turn acting on an accepted confirmation, put the stored call in the
        transcript as the assistant's (exact arguments, no model involved) so it runs next."""
        turn = self.turn
        answer = turn.turn.input.confirmation
        if answer is None or any(isinstance(m, AssistantMessage) for m in turn.turn_messages()):
            return
        if not answer.accepted:
            turn.env.watch.tool_denied(answer.tool)  # the proposed call never runs
            return
        call = ToolCall(
            id=confirmed_call_id(answer.call_id), name=answer.tool, input=answer.arguments
        )
        index = turn.next_index
        await turn.commit(
            StepCommit(
                turn_id=turn.turn_id,
                step_id=f"confirm:{index}",
                step_value={"confirmation_id": answer.confirmation_id},
                messages=[
                    (
                        index,
                        AssistantMessage(
                            turn_id=turn.turn_id, content=(call,), stop_reason="confirmed"
                        ),
                    )
                ],
                events=[ActionRequested(session=turn.session, turn_id=turn.turn_id, call=call)],
            )
        )

    def _confirmed_answer(self, call: ToolCall) -> ConfirmationAnswer | None:
        """The accepted answer this very call acts on (the planned call, exact arguments), if
        any; a call the model makes afterwards, even an identical one, acts on none."""
        answer = self.turn.turn.input.confirmation
        if (
            answer is not None
            and answer.accepted
            and call.id == confirmed_call_id(answer.call_id)
            and call.name == answer.tool
            and call.input == answer.arguments
        ):
            return answer
        return policy_answer(self.turn, call)

    # one call ------------------------------------------------------------------------------

    def tool_for(self, call: ToolCall) -> Tool | None:
        """The tool a call names, if this turn's policy offers it."""
        turn = self.turn
        return turn.env.agent.tool_named(call.name) if call.name in turn.policy.tools else None

    async def run(self, anchor: int, call: ToolCall) -> None:
        turn = self.turn
        tool = self.tool_for(call)
        if tool is None:
            if call.id in turn.parked_call_ids():
                raise TurnFailure(
                    f"AssemblyError: this turn parked in tool {call.name!r}, which the agent no "
                    "longer offers; it cannot resume"
                )
            if turn.env.agent.tool_named(call.name) is not None:
                turn.env.watch.tool_refused(call.id)  # the agent has it; this turn's policy not
            error = self._describe(UnknownToolError(f"no tool named {call.name!r}"), call)
            await turn.commit(self._commit(anchor, call, None, error))
            return
        try:
            arguments = tool.parse_input(call.input)
        except Exception as exc:
            await turn.commit(self._commit(anchor, call, None, self._describe(exc, call)))
            return
        needs_person = tool.confirmation == "required" and self._confirmed_answer(call) is None
        if needs_person and not await approved_by_policy(self.turn, call, tool):
            await self._propose(anchor, call, tool)
            return
        if tool.local:
            await self._local(anchor, call, tool, arguments)
        else:
            await self._remote(anchor, call, tool, arguments)

    def _describe(self, exc: BaseException, call: ToolCall) -> str:
        """The error as the model, the store and Slack may see it: scrubbed of the runtime's
        secrets; a database error reduced to its class, its SQL and parameters logged instead."""
        redact = self.turn.env.redact
        if is_database_error(exc):
            log.warning(
                "tool %s failed with a database error (turn %s):\n%s",
                call.name,
                self.turn.turn_id,
                database_error_detail(exc, redact=redact),
            )
        return describe_error(exc, redact=redact)

    def _context(self, anchor: int, call: ToolCall, tool: Tool, handle: StoreHandle) -> ToolContext:
        turn = self.turn
        inbound = turn.turn.input.inbound
        step_id = f"tool:{anchor}:{call.id}"
        remote = not tool.local
        consent = Consent(
            tool=tool.name,
            mode=tool.confirmation,
            local=tool.local,
            answer=self._confirmed_answer(call),
        )
        return ToolContext(
            store=handle,
            session=turn.session,
            turn_id=turn.turn_id,
            call_id=call.id,
            tool_name=tool.name,
            user=inbound.user if inbound else None,
            inbound=inbound,
            turn_input=turn.turn.input,
            cancellation=turn.cancellation,
            local=tool.local,
            consent=consent,
            answers=turn.steps,
            shared_batch=self._shares_batch(call),
            expires_after=turn.env.agent.expiry_for(tool),
            reminders=tool.reminders,
            facts=FactsView(
                turn.env.store,
                session=turn.session,
                turn_id=turn.turn_id,
                step_id=step_id,
                call_id=call.id,
                local=tool.local,
            ),
            effects=EffectCoordinator(
                turn.env,
                session=turn.session,
                turn_id=turn.turn_id,
                step_id=step_id,
                tool=tool,
                call_input=call.input,
                signal=turn.cancellation,
                consent=consent,
            )
            if remote
            else None,
        )

    def _shares_batch(self, call: ToolCall) -> bool:
        """Whether another call of the same model reply may ask a person too (an async tool
        that takes a context): then the ids of this call's requests are its own
        (`ToolContext.request_input`), so two calls asking "approve" never share an answer."""
        for message in reversed(self.turn.turn_messages()):
            if isinstance(message, AssistantMessage) and any(
                c.id == call.id for c in message.tool_calls
            ):
                return sum(self._may_park(c) for c in message.tool_calls) > 1
        return False

    def _may_park(self, call: ToolCall) -> bool:
        tool = self.tool_for(call)
        return tool is not None and not tool.local and tool.context_param is not None

    def _commit(
        self,
        anchor: int,
        call: ToolCall,
        value: Any,
        error: str | None,
        *,
        note: str | None = None,
        **extra: Any,
    ) -> StepCommit:
        turn = self.turn
        result = {"error": error} if error is not None else value
        note = "\n".join(n for n in (policy_note(turn, call), note) if n) or None
        message = ToolMessage(
            turn_id=turn.turn_id,
            call_id=call.id,
            name=call.name,
            result=result,
            is_error=error is not None,
            note=note,
        )
        event = ActionCompleted(
            session=turn.session,
            turn_id=turn.turn_id,
            call_id=call.id,
            name=call.name,
            result=None if error is not None else value,
            error=error,
            cancel_requested=turn.cancellation.cancelled,
        )
        events = [event, *extra.pop("events", ())]
        return StepCommit(
            turn_id=turn.turn_id,
            step_id=f"tool:{anchor}:{call.id}",
            step_value=result,
            messages=[(turn.next_index, message)],
            events=events,
            **extra,
        )

    async def _local(
        self, anchor: int, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> None:
        def run(handle: StoreHandle) -> Any:
            try:
                outcome = tool.call(arguments, self._context(anchor, call, tool, handle))
                if isinstance(outcome, NeedsConfirmation):
                    _check_may_ask(tool, outcome)  # raises: a local tool cannot ask
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

        def build(value: Any) -> StepCommit:
            return self._commit(anchor, call, value, None)

        try:
            await self.turn.run_local(run, build)
        except FatalToolError as exc:
            raise TurnFailure(self._describe(exc, call)) from None
        except _ToolRaised as raised:
            # its writes were rolled back with the transaction; the model reads the error
            error = self._describe(raised.original, call)
            await self.turn.commit(self._commit(anchor, call, None, error))

    async def _remote(
        self, anchor: int, call: ToolCall, tool: Tool, arguments: dict[str, Any]
    ) -> None:
        ctx = self._context(anchor, call, tool, _NoHandle())
        asked: NeedsConfirmation | None = None
        value: Any = None
        try:
            outcome = await tool.call(arguments, ctx)
            if isinstance(outcome, NeedsConfirmation):
                asked = _check_may_ask(tool, outcome)
            else:
                value = to_json_value(outcome)
                _check_write_was_coordinated(tool, ctx, value)
        except FatalToolError as exc:
            raise TurnFailure(self._describe(exc, call)) from None
        except StoreUnavailableError:
            # The engine's own store, reached through the tool (`run_effect`, facts), is away:
            # not the tool's failure for the model to read. The turn waits and runs it again.
            raise
        except Exception as exc:
            if isinstance(exc, RequestExpiredError) and exc.note in ctx.notes:
                ctx.notes.remove(exc.note)  # the error result says it already
            error = self._describe(exc, call)
            await self.turn.commit(self._commit(anchor, call, None, error, note=_note(ctx)))
            return
        facts = await ctx.facts.records(self.turn.env.clock()) if ctx.facts else []
        if asked is not None:
            await self._propose(anchor, call, tool, asked=asked, facts=facts)
            return
        await self.turn.commit(
            self._commit(anchor, call, value, None, note=_note(ctx), facts=facts)
        )

    # confirmation --------------------------------------------------------------------------

    async def _propose(
        self,
        anchor: int,
        call: ToolCall,
        tool: Tool,
        *,
        asked: NeedsConfirmation | None = None,
        facts: list[FactRecord] | None = None,
    ) -> None:
        """Record the exact call for a person; the model learns it has not run (or, for a
        capability that `asked`, has not acted). Its prompt and details are the capability's
        own; the answerers, the record and the event are the same for both modes, so every
        surface answers either kind through `AgentSession.confirm`."""
        turn = self.turn
        try:
            answerers = tool.answerers_of_call(call.input)
            if answerers is None:
                answerers = default_answerers(turn.turn.input, what="ask for confirmation")
        except ToolError as exc:
            await turn.commit(self._commit(anchor, call, None, self._describe(exc, call)))
            return
        confirmation_id = f"{turn.turn_id}:{call.id}"
        arguments = json.dumps(call.input, sort_keys=True)
        prompt = asked.prompt if asked is not None else f"Allow {tool.name} with {arguments}?"
        now = turn.env.clock()
        lifetime = turn.env.agent.expiry_for(tool)
        timers = tool.reminders.timers(
            session=turn.session,
            kind=TimerKind.CONFIRMATION,
            turn_id=turn.turn_id,
            request_id=confirmation_id,
            now=now,
            expires_at=None if lifetime is None else now + lifetime,
        )
        if lifetime is not None:
            timers.append(
                ApprovalTimer(
                    session=turn.session,
                    kind=TimerKind.CONFIRMATION,
                    turn_id=turn.turn_id,
                    request_id=confirmation_id,
                    due_at=now + lifetime,
                    expires_after=lifetime,
                    created_at=now,
                )
            )
        record = ConfirmationRecord(
            session=turn.session,
            confirmation_id=confirmation_id,
            turn_id=turn.turn_id,
            call_id=call.id,
            tool=tool.name,
            arguments=dict(call.input),
            prompt=prompt,
            answerers=answerers,
            details=asked.details if asked is not None else None,
            created_at=now,
            expires_at=now + lifetime if lifetime is not None else None,
        )
        value: dict[str, Any] = {
            "status": "confirmation_pending",
            "confirmation_id": confirmation_id,
            "note": "Not run: a person must confirm this call first. It runs, with exactly these "
            "arguments, only if they approve.",
        }
        if asked is not None:
            value["note"] = (
                "Not done: a person must confirm the details first. The call runs again, with "
                "exactly these arguments, only if they approve, and acts only if the details "
                "are still the ones they saw."
            )
            value["details"] = asked.details
        requested = ConfirmationRequested(
            session=turn.session,
            turn_id=turn.turn_id,
            confirmation=confirmation_request(
                record, tool, quorum=isinstance(answerers, QuorumAnswerer)
            ),
        )
        await turn.commit(
            self._commit(
                anchor,
                call,
                value,
                None,
                events=[requested],
                confirmations=[record],
                facts=facts or [],
                timers=timers,
            )
        )


def _note(ctx: ToolContext) -> str | None:
    return "\n".join(ctx.notes) or None


def _check_may_ask(tool: Tool, asked: NeedsConfirmation) -> NeedsConfirmation:
    """`ctx.needs_confirmation` checks all this already; a hand-made request is checked here,
    before its details reach the store."""
    if tool.confirmation != "capability" or tool.local:
        raise ToolError(
            f"tool {tool.name!r} returned needs_confirmation, but only an async "
            f"confirmation='capability' tool can ask (it is declared "
            f"confirmation={tool.confirmation!r})"
        )
    if not isinstance(asked.prompt, str) or not asked.prompt.strip():
        raise ToolError("needs_confirmation: the prompt must be a non-empty string")
    return NeedsConfirmation(
        prompt=asked.prompt, details=details_json(asked.details, what="needs_confirmation")
    )


def _check_write_was_coordinated(tool: Tool, ctx: ToolContext, value: Any) -> None:
    """A remote write tool that never called `run_effect` wrote outside any receipt, which is
    exactly what a retry could duplicate. A capability asks with `ctx.needs_confirmation`, which
    never reaches here; a dict that merely says so records nothing, so it is no excuse."""
    if tool.effect != "write" or ctx.effects is None or ctx.effects.used:
        return
    asking = (
        " (or, before writing, return ctx.needs_confirmation(...) to ask a person)"
        if tool.confirmation == "capability"
        else ""
    )
    raise ToolError(
        f"write tool {tool.name!r} finished without calling ctx.run_effect, so its write was "
        f"not coordinated; route the external write through run_effect{asking}"
    )
