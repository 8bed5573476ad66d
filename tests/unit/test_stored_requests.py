"""Typed requests over the JSON the engine has always stored: no migration, no data break.

The literals below were written by the engine before requests were typed (event log rows, a
suspend checkpoint, a turn's result, a confirmation row, captured from a run of that code). They
must decode into the typed models and encode back to the same JSON, and a park or a proposal
made now must store exactly what was stored then. Digests bind answers, grants and buttons
already posted in Slack to a request, so they are pinned to the values the dict code computed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agent import (
    Agent,
    ConfirmationRecord,
    ConfirmationRequest,
    ConfirmationRequested,
    InputRequest,
    InputRequested,
    PolicyAnswerer,
    Runtime,
    ScriptedModel,
    ScriptedReply,
    ToolCall,
    ToolContext,
    TurnResult,
    UserAnswerer,
    tool,
)
from agent._hitl_checks import request_digest
from agent._hitl_confirm import confirmation_digest
from agent.seams import (
    TurnInput,
    TurnRecord,
    TurnStatus,
    event_from_json,
    event_to_json,
    parked_request,
)
from storage import MemoryStore
from storage.ledger_records import confirmation_record, confirmation_values
from tests.support.hitl_fixtures import refund_agent, refund_model, slack_event

DIGEST = "1e1f7b21b0645131b8901f16ee315487d2a41392743dc4a59a097b2dcc5dc46a"

OLD_REQUEST: dict[str, Any] = {
    "id": "approve-refund",
    "prompt": "Approve a $30.0 refund on order 42?",
    "schema": {"type": "boolean"},
    "answerers": {"policy": "operator", "scope": "billing"},
    "turn_id": "T1",
    "call_id": "r1",
    "tool": "issue_refund",
    "digest": DIGEST,
}
OLD_INPUT_EVENT = (
    '{"turn_id":"T1","type":"input.requested","request":{"id":"approve-refund","prompt":'
    '"Approve a $30.0 refund on order 42?","schema":{"type":"boolean"},"answerers":{"policy":'
    '"operator","scope":"billing"},"turn_id":"T1","call_id":"r1","tool":"issue_refund",'
    f'"digest":"{DIGEST}"}}}}'
)
OLD_CHECKPOINT: dict[str, Any] = {
    "call_id": "r1",
    "inbound": {
        "context": {"channel": "C1", "team": "T1"},
        "source": "slack",
        "text": "refund",
        "user": {"attested": True, "id": "U1", "name": None},
    },
    "opening_text": "refund",
    "policy": {"source": "slack", "system": "Refund orders.", "tools": ["issue_refund"]},
    "request": OLD_REQUEST,
    "turn_id": "T1",
    "workspace": {"team": "T1"},
}
OLD_RESULT: dict[str, Any] = {
    "error": None,
    "reason": None,
    "request": OLD_REQUEST,
    "status": "suspended",
    "text": "",
    "usage": {
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
        "input_tokens": 0,
        "output_tokens": 0,
    },
}
OLD_CONFIRMATION_EVENT = (
    '{"turn_id":"T2","type":"confirmation.requested","confirmation":{"id":"T2:c1","turn_id":"T2",'
    '"call_id":"c1","tool":"wire","arguments":{"to":"bob"},"prompt":"Allow wire with {\\"to\\": '
    '\\"bob\\"}?","answerers":{"user":"U1"},"details":null,"status":"pending"}}'
)
COLUMNS_OF_0005: dict[str, Any] = {"reason": None, "expires_at": None}
"""Columns revision 0005 added to `confirmations` (NULL for a proposal without them)."""
COLUMNS_OF_0014: dict[str, Any] = {"approved_arguments": None}
"""The column revision 0014 added (NULL for a proposal nobody edited)."""
OLD_CONFIRMATION_ROW: dict[str, Any] = {
    "session_key": "s2",
    "confirmation_id": "T2:c1",
    "turn_id": "T2",
    "call_id": "c1",
    "tool": "wire",
    "arguments": '{"to":"bob"}',
    "prompt": 'Allow wire with {"to": "bob"}?',
    "answerers": '{"user":"U1"}',
    "details": None,
    "status": "pending",
    "answered_by": None,
    "follow_up_turn": None,
    "created_at": 1796112177.5783002,
    "resolved_at": None,
}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# -- rows written before the types existed ----------------------------------------------------


def test_an_old_input_event_decodes_typed_and_encodes_byte_for_byte() -> None:
    event = event_from_json(OLD_INPUT_EVENT, session="s1", seq=4)
    assert isinstance(event, InputRequested)
    assert event.request.json_schema == {"type": "boolean"}
    assert event.request.answerers == PolicyAnswerer(policy="operator", scope="billing")
    assert event_to_json(event) == OLD_INPUT_EVENT


def test_an_old_checkpoint_yields_the_typed_request_and_its_stored_dict() -> None:
    request = parked_request(OLD_CHECKPOINT)
    assert request is not None
    assert (request.id, request.turn_id, request.call_id, request.tool, request.digest) == (
        "approve-refund",
        "T1",
        "r1",
        "issue_refund",
        DIGEST,
    )
    assert request.to_json() == OLD_REQUEST
    assert parked_request({"turn_id": "T1"}) is None


def test_an_old_turn_result_round_trips() -> None:
    record = TurnRecord(
        session="s1",
        turn_id="T1",
        seq=1,
        status=TurnStatus.SUSPENDED,
        input=TurnInput(text="refund"),
        result=OLD_RESULT,
    )
    result = TurnResult.from_record(record)
    assert isinstance(result.request, InputRequest)
    assert result.request.id == "approve-refund"
    assert _canonical(result.to_json()) == _canonical(OLD_RESULT)


def test_an_old_confirmation_event_and_row_round_trip() -> None:
    event = event_from_json(OLD_CONFIRMATION_EVENT, session="s2", seq=7)
    assert isinstance(event, ConfirmationRequested)
    assert event.confirmation.answerers == UserAnswerer(user="U1")
    assert event.confirmation.arguments == {"to": "bob"}
    assert event_to_json(event) == OLD_CONFIRMATION_EVENT

    record = confirmation_record(OLD_CONFIRMATION_ROW)
    assert record.answerers == UserAnswerer(user="U1")
    assert confirmation_values(record) == {
        **OLD_CONFIRMATION_ROW,
        **COLUMNS_OF_0005,
        **COLUMNS_OF_0014,
    }


# -- digests: pinned to what the dict code computed -------------------------------------------

SCHEMA = {"type": "boolean", "description": "Approve the refund?"}
PROMPT = "Refund order 42 ($12.50)?"


def test_request_digests_are_the_ones_the_dict_code_gave() -> None:
    def digest_of(stored: dict[str, Any]) -> str:
        typed = InputRequest.model_validate({**stored, "digest": "-"})
        return request_digest(
            typed.turn_id, typed.id, typed.prompt, typed.json_schema, typed.answerers
        )

    base = {"id": "approve-refund", "prompt": PROMPT, "turn_id": "T1", "call_id": "c", "tool": "t"}
    user = {"schema": SCHEMA, "answerers": {"user": "U1"}}
    policy = {"schema": SCHEMA, "answerers": {"policy": "operator", "scope": "billing"}}
    no_scope = {"schema": None, "answerers": {"policy": "operator"}}
    null_scope = {"schema": None, "answerers": {"policy": "operator", "scope": None}}
    assert digest_of({**base, **user}) == (
        "e435e7b47eb434084262d1a926063da4ffcb6f335fe920c7c931b456a1757051"
    )
    assert digest_of({**base, **policy}) == (
        "4041afec151c6640857d80b84ee87ff9e190154d582d0710e4bae58326b4007e"
    )
    assert digest_of({**base, **no_scope}) == (
        "43a1da5b1edf7d82dce1874435a635c1c89b9cd0466b51db590ed0aead4fcd2f"
    )
    assert digest_of({**base, **null_scope}) == (
        "687e30da8feaa4ff132f8cde935fe3aed36a3c7934b1fd2186b9c0f8e8f1c64d"
    )
    assert (
        request_digest("T1", "go", "Go ahead? — ünïcode", None, None)
        == "111b6815cfbc95d948bf48aefc3ecdeea2fc1c6f980eee6d7cd395e3091f49fc"
    )


def test_the_digest_of_an_old_request_is_the_one_stored_with_it() -> None:
    request = InputRequest.model_validate(OLD_REQUEST)
    assert (
        request_digest(
            request.turn_id, request.id, request.prompt, request.json_schema, request.answerers
        )
        == request.digest
        == DIGEST
    )


def test_confirmation_digests_are_the_ones_the_dict_code_gave() -> None:
    proposal = ConfirmationRecord(
        session="s",
        confirmation_id="T1:c1",
        turn_id="T1",
        call_id="c1",
        tool="issue_refund",
        arguments={"order_id": "42", "amount": 12.5},
        prompt="Allow issue_refund?",
        answerers=UserAnswerer(user="U1"),
    )
    assert (
        confirmation_digest(proposal)
        == "6070f380e87dbccefc2126b22684c620cae89fe1906c3f408568c20331f09213"
    )
    capability = dataclasses.replace(
        proposal,
        answerers=PolicyAnswerer(scope="charges", policy="billing"),
        details={"order": "o1", "amount": 42},
    )
    assert (
        confirmation_digest(capability)
        == "7cf24f2c00593132cdd743b8a17772c1466d9882165762302a0bed9ff1113799"
    )


# -- what the engine stores now is what it stored then ----------------------------------------


async def test_a_park_stores_what_the_dict_code_stored() -> None:
    store = MemoryStore()
    agent = refund_agent({"policy": "operator", "scope": "billing"})
    async with Runtime(store, refund_model(), agent=agent, poll_interval=0.01) as runtime:
        session = runtime.session(agent, "s1")
        parked = await session.result(await session.start(slack_event("refund"), turn_id="T1"))
        [pending] = await session.pending()
    record = await store.get_session("s1")
    assert record is not None
    # Issue 16 added when the turn parked (for who-may-answer-what); nothing else changed.
    checkpoint = dict(record.pending)
    assert isinstance(checkpoint.pop("parked_at"), float)
    assert _canonical(checkpoint) == _canonical(OLD_CHECKPOINT)
    # Issue 28: a parked turn's result says what the model said before it parked, and counts
    # the tokens of its model steps (it said "" and 0).
    usage = {**OLD_RESULT["usage"], "input_tokens": 10, "output_tokens": 5}
    said = {"text": "Asking for approval.", "usage": usage}
    assert _canonical(parked.to_json()) == _canonical({**OLD_RESULT, **said})
    [requested] = [e for e in await store.read_events("s1") if e.type == "input.requested"]
    assert event_to_json(requested) == OLD_INPUT_EVENT
    assert pending == parked.request == InputRequest.model_validate(OLD_REQUEST)


async def test_a_proposal_stores_what_the_dict_code_stored() -> None:
    @tool(effect="write", confirmation="required")
    async def wire(to: str, ctx: ToolContext) -> dict[str, str]:
        """Wire money."""
        return {}

    agent = Agent(name="a", instructions="x", tools=[wire])
    model = ScriptedModel(
        [
            ScriptedReply(tool_calls=[ToolCall(id="c1", name="wire", input={"to": "bob"})]),
            ScriptedReply(text="ok"),
        ]
    )
    store = MemoryStore()
    async with Runtime(store, model, agent=agent, poll_interval=0.01) as runtime:
        session = runtime.session(agent, "s2")
        await session.result(await session.start(slack_event("wire"), turn_id="T2"))
        [proposal] = await session.confirmations()
    [requested] = [e for e in await store.read_events("s2") if e.type == "confirmation.requested"]
    assert event_to_json(requested) == OLD_CONFIRMATION_EVENT
    assert isinstance(requested.confirmation, ConfirmationRequest)
    row = confirmation_values(proposal)
    expected = {**OLD_CONFIRMATION_ROW, **COLUMNS_OF_0005, **COLUMNS_OF_0014, "created_at": 0}
    assert {**row, "created_at": 0} == expected
