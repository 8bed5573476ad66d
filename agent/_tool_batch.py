"""One model reply's batch of tool calls: the remote ones side by side, the local ones in order.

Claude often asks for several tools at once ("look up the customer, the order and the carrier");
run one after another, three slow lookups take three times as long. So the batch's `async def`
(remote) calls run concurrently, at most `TurnEnv.tool_concurrency` at once and at most a tool's
own `concurrency` of any one tool, each committing its own `tool:<anchor>:<call id>` step the
moment it finishes. `def` (local) calls run inside the step's transaction, one at a time and in
call order, beside them. Nothing of the crash semantics changes, since each call still commits
on its own: a finished call is never run again, an unfinished one is, and an effect inside one
is settled by its receipt.

A batch ends only when every call it started has ended: a call never outlives its turn, so no
result is committed after the turn failed, was cancelled or parked. What ends the turn is then
chosen by weight: the store's trouble (or a bug) first, a failed turn, a cancellation. Otherwise,
if calls asked a person (`request_input`), the turn parks on all of their requests at once, in
call order, after every other call of the batch has finished (`agent._turn_loop`'s `_park`):
each is answered on its own and the turn resumes when none still waits. The same holds when the
calls run one after another (`tool_concurrency` 1): a call that asks does not keep the next from
running. A cancellation reaches every running call through the turn's signal, and a call not yet
started never starts; the turn's cancel gives each call left without a result its
`{"cancelled": true}`.

The results are committed in the order they finished; `in_call_order` puts them back in call
order for the model and for every reader of the transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from agent._hitl_automatic import ANSWER_ROUNDS, answered_by_policy
from agent._messages import AssistantMessage, Message, ToolCall, ToolMessage
from agent._signals import CancelTurn, ParkTurn
from agent._tool_steps import ToolStepRunner, TurnFailure

if TYPE_CHECKING:
    from agent._tools import Tool


async def run_batch(runner: ToolStepRunner, anchor: int, calls: Sequence[ToolCall]) -> None:
    """Run the calls of the assistant message at `anchor` that have no result yet."""
    turn = runner.turn
    limit = turn.env.tool_concurrency
    order = {call.id: n for n, call in enumerate(calls)}
    parks: list[ParkTurn] = []

    async def run_one(call: ToolCall) -> None:
        turn.checkpoint()
        with turn.env.watch.tool_call(call):
            await run_answering(call)

    async def run_answering(call: ToolCall) -> None:
        for _ in range(ANSWER_ROUNDS):
            try:
                await runner.run(anchor, call)
                return
            except ParkTurn as park:
                if not await answered_by_policy(turn, call, park):
                    parked(park, call)  # the batch goes on: its other calls may ask, or finish
                    return
                turn.checkpoint()  # answered by the agent's rule: the call runs again
        try:
            await runner.run(anchor, call)
        except ParkTurn as park:
            parked(park, call)  # a rule that kept answering: the next request waits for a person

    def parked(park: ParkTurn, call: ToolCall) -> None:
        parks.append(park)
        turn.env.watch.tool_parked(call.id)

    if limit <= 1 or len(calls) <= 1:
        for call in calls:  # one call after another
            await run_one(call)
    else:
        await _side_by_side(runner, calls, limit, run_one)
    if parks:
        turn.checkpoint()  # stopped while its siblings ran: no request is ever posted
        parks.sort(key=lambda park: order.get(park.request.call_id, len(order)))
        raise ParkTurn.together(parks)


async def _side_by_side(
    runner: ToolStepRunner,
    calls: Sequence[ToolCall],
    limit: int,
    run_one: Callable[[ToolCall], Awaitable[None]],
) -> None:
    slots = asyncio.Semaphore(limit)
    per_tool: dict[str, asyncio.Semaphore] = {}

    async def one(call: ToolCall, tool: Tool) -> None:
        gate: contextlib.AbstractAsyncContextManager[object] = contextlib.nullcontext()
        if tool.concurrency is not None:
            gate = per_tool.setdefault(tool.name, asyncio.Semaphore(tool.concurrency))
        async with gate, slots:
            await run_one(call)

    async def in_order(serial: Sequence[ToolCall]) -> None:
        for call in serial:
            async with slots:
                await run_one(call)

    serial: list[ToolCall] = []
    remote: list[tuple[ToolCall, Tool]] = []
    for call in calls:
        tool = runner.tool_for(call)
        if tool is not None and not tool.local:
            remote.append((call, tool))
        else:
            serial.append(call)  # local, unknown or not offered: in call order
    # Made in call order, so the semaphores (first come, first served) start them in that order.
    tasks = [asyncio.ensure_future(one(call, tool)) for call, tool in remote]
    if serial:
        tasks.insert(0, asyncio.ensure_future(in_order(serial)))
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    raised = [o for o in outcomes if isinstance(o, BaseException)]
    if raised:
        raise _weightiest(raised)


def _weightiest(raised: list[BaseException]) -> BaseException:
    """What the turn ends with when several calls ended it at once (see the module's text)."""

    def weight(err: BaseException) -> int:
        if isinstance(err, CancelTurn):
            return 1
        if isinstance(err, TurnFailure):
            return 2
        return 3

    return max(raised, key=weight)


def in_call_order(transcript: list[Message]) -> list[Message]:
    """The transcript with each batch's results in the order of its calls (in place; returned).

    A batch's results follow its assistant message in the order they finished, and nothing else
    is written between them, so putting each run of results in call order moves no other
    message and no index that a step id or a window names."""
    for position, message in enumerate(transcript):
        if isinstance(message, AssistantMessage) and len(message.tool_calls) > 1:
            results_in_call_order(transcript, position)
    return transcript


def results_in_call_order(transcript: list[Message], anchor: int) -> None:
    """Put the results following the assistant message at position `anchor` in call order."""
    message = transcript[anchor]
    assert isinstance(message, AssistantMessage)
    start = end = anchor + 1
    while end < len(transcript) and isinstance(transcript[end], ToolMessage):
        end += 1
    if end - start > 1:
        order = {call.id: n for n, call in enumerate(message.tool_calls)}
        results = transcript[start:end]
        results.sort(key=lambda m: order.get(getattr(m, "call_id", ""), len(order)))
        transcript[start:end] = results


def place_result(transcript: list[Message]) -> None:
    """A result just appended, moved back among its batch's results to its call's place."""
    anchor = len(transcript) - 1
    while anchor > 0 and isinstance(transcript[anchor], ToolMessage):
        anchor -= 1
    if isinstance(transcript[anchor], AssistantMessage):
        results_in_call_order(transcript, anchor)
