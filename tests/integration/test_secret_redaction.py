"""A secret in a tool's error reaches neither the store nor the model: every path where exception
text becomes a tool result, an event, a step, a receipt or a turn's failure is scrubbed, and a
database error reaches the model only as its class."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

import pytest
from sqlalchemy import Connection, text

from agent import (
    Agent,
    EffectNotAppliedError,
    FatalToolError,
    ModelError,
    RecordingSink,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    SessionStore,
    ToolCall,
    ToolContext,
    ToolMessage,
    TurnStatus,
    tool,
)
from agent._tool_steps import confirmed_call_id
from agent.models import opening_text
from agent.seams import ModelRequest
from storage import SqlStore
from storage.sql.schema import STORE_TABLES
from tests.support.confirmations import approve_pending

CONFIGURED = "cfg-Partner-key-9f3a2b"
"""A configured secret value with no recognisable shape: only configuration can catch it."""
SLACK_TOKEN = "xoxb-2222222222-3333333333-ZyXwVuTsRqPoNmLk"
ANTHROPIC_KEY = "sk-ant-api03-Qw3rTy_uIoP-AsDfGhJkL0123456789"
DB_PASSWORD = "db-Pa55word-77"
BEARER = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib3QifQ.c2lnbmF0dXJlLXZhbHVl"
LEAKS = (CONFIGURED, SLACK_TOKEN, ANTHROPIC_KEY, DB_PASSWORD, BEARER)


@tool
async def call_partner(order: str) -> dict[str, Any]:
    """A remote call whose SDK puts its credentials in the error."""
    raise RuntimeError(
        f"partner refused order {order}: key {CONFIGURED}, Authorization: Bearer {BEARER}"
    )


@tool
def save_note(note: str) -> dict[str, Any]:
    """A local tool that fails with a token and a database URL in its message."""
    raise ValueError(
        f"could not save {note!r} with {SLACK_TOKEN} at "
        f"postgresql+psycopg://bot:{DB_PASSWORD}@db.internal:5432/app"
    )


@tool(effect="write", confirmation="required")
async def charge(order: str, ctx: ToolContext) -> dict[str, Any]:
    """A write whose provider errors carry the key: one proves nothing was applied, one not.
    Proposed in the "go" turn; it runs in the turns acting on the approvals."""

    async def declined(authority: Any) -> Any:
        raise EffectNotAppliedError(f"declined for key {CONFIGURED}")

    async def timed_out(authority: Any) -> Any:
        raise TimeoutError(f"no answer from https://svc:{DB_PASSWORD}@pay.example/{ANTHROPIC_KEY}")

    effect = await ctx.run_effect(f"charge:{order}", declined if order == "a" else timed_out)
    return {"charged": effect.value}


@tool
async def broken_config() -> str:
    """A deployment mistake whose message names the key."""
    raise FatalToolError(f"the partner rejected {CONFIGURED} and {ANTHROPIC_KEY}")


AGENT = Agent(
    name="leaky",
    instructions="x",
    tools=[call_partner, save_note, charge, broken_config],
)

SCRIPT = {
    "go": [
        ScriptedReply(
            tool_calls=[
                ToolCall(id="r", name="call_partner", input={"order": "o1"}),
                ToolCall(id="l", name="save_note", input={"note": "hi"}),
                ToolCall(id="a", name="charge", input={"order": "a"}),
                ToolCall(id="b", name="charge", input={"order": "b"}),
            ]
        ),
        ScriptedReply(text="Those calls failed."),
    ],
    "fatal": [ScriptedReply(tool_calls=[ToolCall(id="f", name="broken_config", input={})])],
}


def _respond(request: ModelRequest, step: int) -> ScriptedReply:
    """The script by opening; a turn acting on an approved charge only reports."""
    script = SCRIPT.get(opening_text(request.messages))
    return script[step] if script is not None else ScriptedReply(text="The charge failed.")


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return repr(asdict(value))
    if isinstance(value, Sequence):  # a `TranscriptView`, whose repr shows no message
        return list(value)
    return repr(value)


def _text(values: Any) -> str:
    return json.dumps(values, default=_plain, sort_keys=True)


async def _everything_stored(store: SessionStore, session: str) -> str:
    """Every record the store gives back through its API, and for SQL every row of every table."""
    turns = await store.list_turns(session)
    parts: list[Any] = [
        await store.load_transcript(session),
        await store.read_events(session),
        turns,
        await store.list_receipts(),
        [await store.load_steps(session, turn.turn_id) for turn in turns],
    ]
    if isinstance(store, SqlStore):

        def dump(conn: Connection) -> list[Any]:
            return [[tuple(row) for row in conn.execute(table.select())] for table in STORE_TABLES]

        parts.append(await store.run_sync(dump))
    return _text(parts)


async def test_no_secret_from_a_tool_error_is_stored_or_sent_to_the_model(
    store: SessionStore,
) -> None:
    model = ScriptedModel(responder=_respond)
    sink = RecordingSink()
    async with Runtime(
        store,
        model,
        agent=AGENT,
        sink=sink,
        secrets=[CONFIGURED, DB_PASSWORD],
        recovery_interval=0.05,
        poll_interval=0.02,
    ) as rt:
        session = rt.session(AGENT, "s1")
        done = await session.turn("go", turn_id="T1")
        charged = await approve_pending(session)
        failed = await session.turn("fatal", turn_id="T2")

    assert done.status == TurnStatus.COMPLETED
    assert [c.status for c in charged] == [TurnStatus.COMPLETED] * 2
    assert failed.status == TurnStatus.FAILED
    stored = await _everything_stored(store, "s1")
    sent = _text([request.messages for request in model.requests])
    live = _text(sink.events)
    assert "[redacted]" in stored
    assert "[redacted]" in sent
    for leak in LEAKS:
        assert leak not in stored, f"{leak} stored"
        assert leak not in sent, f"{leak} sent to the model"
        assert leak not in live, f"{leak} emitted"
    assert failed.error is not None
    for leak in LEAKS:
        assert leak not in failed.error

    # the model still reads what went wrong, minus the secrets
    errors = {
        m.call_id: m.result["error"]
        for request in model.requests
        for m in request.messages
        if isinstance(m, ToolMessage) and m.is_error
    }
    assert {"r", "l"} <= {
        m.call_id for m in model.requests[1].messages if isinstance(m, ToolMessage) and m.is_error
    }
    assert errors["r"] == (
        "RuntimeError: partner refused order o1: key [redacted], Authorization: Bearer [redacted]"
    )
    assert errors["l"] == (
        "ValueError: could not save 'hi' with [redacted] at "
        "postgresql+psycopg://bot:[redacted]@db.internal:5432/app"
    )
    assert errors[confirmed_call_id("a")] == "EffectNotAppliedError: declined for key [redacted]"
    assert errors[confirmed_call_id("b")].startswith(
        "EffectUncertainError: the outcome of charge:charge:b"
    )
    assert failed.error == "FatalToolError: the partner rejected [redacted] and [redacted]"
    receipts = {r.key: r.error for r in await store.list_receipts(session="s1")}
    assert receipts["charge:charge:a"] == "declined for key [redacted]"
    assert receipts["charge:charge:b"] == (
        "TimeoutError: no answer from https://svc:[redacted]@pay.example/[redacted]"
    )


async def test_a_model_error_naming_the_key_fails_the_turn_without_it(store: SessionStore) -> None:
    def refuse(request: ModelRequest, step: int) -> ScriptedReply:
        raise ModelError(f"401 invalid x-api-key {ANTHROPIC_KEY} (also tried {CONFIGURED})")

    agent = Agent(name="m", instructions="x")
    async with Runtime(
        store, ScriptedModel(responder=refuse), agent=agent, secrets=[CONFIGURED]
    ) as rt:
        result = await rt.session(agent, "s1").turn("hi", turn_id="T1")

    assert result.status == TurnStatus.FAILED
    assert result.error == "ModelError: 401 invalid x-api-key [redacted] (also tried [redacted])"
    stored = await _everything_stored(store, "s1")
    assert "turn.failed" in stored
    assert ANTHROPIC_KEY not in stored
    assert CONFIGURED not in stored


@tool
def record_note(note: str, ctx: ToolContext) -> dict[str, Any]:
    """A local tool whose SQL fails: the statement and its parameters name a secret."""
    conn: Connection = ctx.store.unwrap()
    conn.execute(
        text("insert into no_such_table (note, api_key) values (:note, :key)"),
        {"note": note, "key": CONFIGURED},
    )
    return {"saved": True}


async def test_a_failing_sql_statement_gives_the_model_no_sql(
    sql_store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent(name="db", instructions="x", tools=[record_note])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c", name="record_note", input={"note": "hi"})]),
            ScriptedReply(text="The database refused."),
        ]
    )
    caplog.set_level(logging.WARNING, logger="agent")
    async with Runtime(
        sql_store, model, agent=agent, secrets=[CONFIGURED], recovery_interval=0.05
    ) as rt:
        result = await rt.session(agent, "s1").turn("save it", turn_id="T1")

    assert result.status == TurnStatus.COMPLETED
    [message] = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert message.is_error
    error = message.result["error"]
    assert re.fullmatch(
        r"(OperationalError|ProgrammingError): a database error; details are in the logs", error
    ), error
    stored = await _everything_stored(sql_store, "s1")
    sent = _text([r.messages for r in model.requests])
    assert "a database error" in stored
    assert "a database error" in sent
    for sql_text in ("no_such_table", "insert into", CONFIGURED):
        assert sql_text not in stored
        assert sql_text not in sent
    # the operator still gets the whole error, scrubbed
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "no_such_table" in logged
    assert CONFIGURED not in logged
