"""The turn every measurement runs, and its rows spelled out for the floor and the set-up.

The engine writes a step's rows itself; the raw floor and the pre-populated history need the same
rows without the engine. They are built here from the engine's own record types and encoder, so
every JSON body has the byte size the engine writes, following the commit shape of
`agent._turn_loop` (opening, `model:<n>`, `tool:<n>:<callId>`, final model step). The benchmark
compares the rows both sides actually wrote, so a drift between this file and the loop shows up.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from agent import (
    ActionCompleted,
    ActionRequested,
    Agent,
    AssistantMessage,
    MessageCompleted,
    ScriptedReply,
    TextBlock,
    ToolCall,
    ToolMessage,
    TurnCompleted,
    TurnEvent,
    TurnInput,
    TurnResult,
    TurnStarted,
    TurnStatus,
    Usage,
    UserMessage,
    tool,
)
from agent.models import Responder
from agent.seams import ModelRequest, SessionStatus, StepCommit
from storage.records import encode_commit

OPENING_TEXT = "Run the probe once per step until every call is answered, then say done."
FINAL_TEXT = "Done: every probe answered."
TOOL_NAME = "probe"
USAGE = Usage(input_tokens=10, output_tokens=5)
HISTORY_CALLS_PER_TURN = 4
"""A history turn is 10 messages: opening, 4 x (assistant call, tool result), final answer."""

PLACEHOLDER_SESSION = "bench"
"""Event bodies leave the session out (it is the row key), so rows built once serve every key."""


def tool_result(n: int) -> dict[str, Any]:
    return {"n": n, "ok": True}


def call_id(n: int) -> str:
    return f"call_{n:04d}"


def step_text(n: int) -> str:
    return f"Step {n}: asking the probe."


@tool
async def probe(n: int) -> dict[str, Any]:
    """Answer at once: the benchmark times the engine's durability, not a tool."""
    return tool_result(n)


BENCH_AGENT = Agent(
    name="bench",
    instructions="Call the probe tool when asked; answer briefly.",
    tools=[probe],
)


def responder(calls: int) -> Responder:
    """A zero-latency model: one tool call per step for `calls` steps, then the final answer."""

    def respond(_request: ModelRequest, step: int) -> ScriptedReply:
        if step < calls:
            return ScriptedReply(
                text=step_text(step),
                tool_calls=[(call_id(step), TOOL_NAME, {"n": step})],
                usage=USAGE,
            )
        return ScriptedReply(text=FINAL_TEXT, usage=USAGE)

    return respond


def steps_per_turn(calls: int) -> int:
    """Durable commits in one turn: the opening, a model and a tool step per call, the answer."""
    return 2 * calls + 2


# -- rows -----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class StepRows:
    """One step's transaction as plain values (no session key: it is added when written)."""

    step_id: str | None
    step_value: str | None
    messages: list[tuple[int, str, str, str]]
    """(idx, turn_id, role, body)"""
    events: list[tuple[str, str, str]]
    """(turn_id, type, body); seqs come from the fence, as in the engine."""
    session_status: str | None
    turn_status: str | None
    turn_result: str | None


@dataclass(frozen=True, kw_only=True)
class History:
    """A session's transcript before the measured turn, as rows for bulk insertion."""

    size: int
    turns: list[tuple[str, str, str, str | None, None, float]]
    """(turn_id, status, input, result, cancel_reason, created_at)"""
    messages: list[tuple[int, str, str, str]]
    steps: list[tuple[str, str, str]]
    """(turn_id, step_id, value)"""
    events: list[tuple[int, str, str, str]]
    """(seq, turn_id, type, body)"""


def turn_input_json() -> str:
    return TurnInput(text=OPENING_TEXT).model_dump_json()


def turn_commits(turn_id: str, start: int, calls: int) -> list[StepCommit]:
    """The commits `TurnRunner` makes for this workload's turn opening at transcript index start."""
    session = PLACEHOLDER_SESSION
    opening = UserMessage(turn_id=turn_id, text=OPENING_TEXT, by=None)
    started: list[TurnEvent] = [
        TurnStarted(session=session, turn_id=turn_id, text=OPENING_TEXT, source=None)
    ]
    commits = [
        StepCommit(
            turn_id=turn_id,
            messages=[(start, opening)],
            events=started,
            turn_status=TurnStatus.RUNNING,
            session_status=SessionStatus.RUNNING,
        )
    ]
    index = start + 1
    for k in range(calls):
        call = ToolCall(id=call_id(k), name=TOOL_NAME, input={"n": k})
        asked = AssistantMessage(
            turn_id=turn_id,
            content=(TextBlock(text=step_text(k)), call),
            stop_reason="tool_use",
            usage=USAGE,
        )
        model_events: list[TurnEvent] = [
            MessageCompleted(session=session, turn_id=turn_id, index=index, text=asked.text),
            ActionRequested(session=session, turn_id=turn_id, call=call),
        ]
        commits.append(
            StepCommit(
                turn_id=turn_id,
                step_id=f"model:{index}",
                step_value={"stop_reason": "tool_use"},
                messages=[(index, asked)],
                events=model_events,
            )
        )
        anchor, index = index, index + 1
        result = tool_result(k)
        answered = ToolMessage(
            turn_id=turn_id, call_id=call.id, name=TOOL_NAME, result=result, is_error=False
        )
        tool_events: list[TurnEvent] = [
            ActionCompleted(
                session=session, turn_id=turn_id, call_id=call.id, name=TOOL_NAME, result=result
            )
        ]
        commits.append(
            StepCommit(
                turn_id=turn_id,
                step_id=f"tool:{anchor}:{call.id}",
                step_value=result,
                messages=[(index, answered)],
                events=tool_events,
            )
        )
        index += 1
    final = AssistantMessage(
        turn_id=turn_id, content=(TextBlock(text=FINAL_TEXT),), stop_reason="end_turn", usage=USAGE
    )
    usage = Usage()
    for _ in range(calls + 1):
        usage = usage + USAGE
    outcome = TurnResult(turn_id=turn_id, status=TurnStatus.COMPLETED, text=FINAL_TEXT, usage=usage)
    final_events: list[TurnEvent] = [
        MessageCompleted(session=session, turn_id=turn_id, index=index, text=FINAL_TEXT),
        TurnCompleted(session=session, turn_id=turn_id, text=FINAL_TEXT, usage=usage),
    ]
    commits.append(
        StepCommit(
            turn_id=turn_id,
            step_id=f"model:{index}",
            step_value={"stop_reason": "end_turn"},
            messages=[(index, final)],
            events=final_events,
            turn_status=TurnStatus.COMPLETED,
            turn_result=outcome.to_json(),
            session_status=SessionStatus.IDLE,
        )
    )
    return commits


def step_rows(commit: StepCommit) -> StepRows:
    encoded = encode_commit(PLACEHOLDER_SESSION, commit)
    return StepRows(
        step_id=commit.step_id,
        step_value=encoded.step_value,
        messages=[(m.idx, m.turn_id, m.role, m.body) for m in encoded.messages],
        events=[(e.turn_id, e.type, e.body) for e in encoded.events],
        session_status=None if commit.session_status is None else commit.session_status.value,
        turn_status=None if commit.turn_status is None else commit.turn_status.value,
        turn_result=encoded.turn_result,
    )


def turn_plan(turn_id: str, start: int, calls: int) -> list[StepRows]:
    """The floor's script for one measured turn: exactly the rows the engine's turn commits."""
    return [step_rows(commit) for commit in turn_commits(turn_id, start, calls)]


def history(size: int) -> History:
    """`size` messages of finished 10-message turns (the last one shorter if size needs it)."""
    if size < 2 or size % 2:
        raise ValueError(f"a transcript size must be even and at least 2, not {size}")
    turns: list[tuple[str, str, str, str | None, None, float]] = []
    message_rows: list[tuple[int, str, str, str]] = []
    step_rows_: list[tuple[str, str, str]] = []
    event_rows: list[tuple[int, str, str, str]] = []
    body = turn_input_json()
    now = time.time()
    start = 0
    while start < size:
        calls = min(HISTORY_CALLS_PER_TURN, (size - start - 2) // 2)
        turn_id = f"{len(turns):032x}"
        result: str | None = None
        for rows in turn_plan(turn_id, start, calls):
            message_rows.extend(rows.messages)
            if rows.step_id is not None and rows.step_value is not None:
                step_rows_.append((turn_id, rows.step_id, rows.step_value))
            for turn, kind, event_body in rows.events:
                event_rows.append((len(event_rows) + 1, turn, kind, event_body))
            result = rows.turn_result or result
        turns.append((turn_id, TurnStatus.COMPLETED.value, body, result, None, now))
        start += 2 * calls + 2
    return History(
        size=size, turns=turns, messages=message_rows, steps=step_rows_, events=event_rows
    )
