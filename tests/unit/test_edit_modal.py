"""The "Edit & approve" modal: an input per editable argument, its element chosen from the tool's
JSON schema and prefilled with the proposed value, within Slack's limits (the stand-in's Block
Kit rules check each modal); a submission read back as the arguments it changed, or as each
input's error; the engine's refusal placed under the inputs; what changed, in words."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

import pytest
from pydantic import Field

from agent import EditRejected, ResumeValidationError, ToolContext, tool
from agent._hitl_edits import MAX_SHOWN
from bot.slack.approval_blocks import ApprovalRef
from bot.slack.clicks import Click
from bot.slack.deny_modal import Opened
from bot.slack.edit_fields import MAX_TEXT, EditField, block_id_of, fields_of, input_block
from bot.slack.edit_modal import (
    EDIT_MODAL,
    MAX_CHANGES,
    MAX_FIELDS,
    approved_changes,
    argument_changes,
    changes_text,
    edit_modal,
    edits_of,
    event_changes,
)
from bot.testing.agent_events import state_values
from bot.testing.blocks import view_problem


class Speed(StrEnum):
    STANDARD = "standard"
    EXPRESS = "express"


@tool(effect="write", confirmation="required", editable=True)
async def ship(
    order_id: str,
    ctx: ToolContext,
    count: int = Field(ge=1, le=500),
    price: float = 9.5,
    speed: Speed = Speed.STANDARD,
    reason: Literal["damaged", "late"] = "late",
    gift: bool = False,
    tags: list[str] | None = None,
    limit: int | None = None,
    note: str = "",
) -> dict[str, Any]:
    """Ship an order (every argument editable)."""
    return {}


PROPOSED: dict[str, Any] = {
    "order_id": "A-1",
    "count": 3,
    "price": 9.5,
    "speed": "standard",
    "reason": "late",
    "gift": False,
    "tags": ["fragile"],
    "note": "leave at the door",
}
FIELDS = fields_of(ship.input_schema, ship.editable)


def _modal(proposed: dict[str, Any] = PROPOSED, fields: list[EditField] = FIELDS) -> Any:
    return edit_modal("Ship order A-1?", "sealed", fields, proposed)


def _inputs(view: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["block_id"]: b for b in view["blocks"] if b["type"] == "input"}


def _submitted(view: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The view as its submission carries it: every input, `values` ({argument: entered})
    where the person changed it."""
    entered = {block_id_of(name): {"value": given} for name, given in values.items()}
    return {"state": {"values": state_values(view["blocks"], entered)}}


# the inputs ----------------------------------------------------------------------------------


def test_each_argument_gets_the_element_its_schema_calls_for() -> None:
    view = _modal()
    assert view_problem(view, kind="modal") is None
    assert view["callback_id"] == EDIT_MODAL
    assert len(view["title"]["text"]) <= 24
    elements = {bid.removeprefix("edit:"): b["element"] for bid, b in _inputs(view).items()}
    assert elements["count"] == {
        "action_id": "value",
        "type": "number_input",
        "is_decimal_allowed": False,
        "initial_value": "3",
        "min_value": "1",
        "max_value": "500",
    }
    assert elements["price"]["type"] == "number_input"
    assert elements["price"]["is_decimal_allowed"] is True
    assert elements["price"]["initial_value"] == "9.5"
    for name in ("speed", "reason"):  # an Enum (a $ref) and a Literal
        assert elements[name]["type"] == "static_select"
    assert [o["text"]["text"] for o in elements["speed"]["options"]] == ["standard", "express"]
    assert elements["speed"]["initial_option"]["text"]["text"] == "standard"
    assert elements["reason"]["initial_option"]["value"] == '"late"'
    assert elements["gift"]["type"] == "radio_buttons"
    assert [o["text"]["text"] for o in elements["gift"]["options"]] == ["Yes", "No"]
    assert elements["gift"]["initial_option"]["text"]["text"] == "No"
    assert elements["note"] == {
        "action_id": "value",
        "type": "plain_text_input",
        "initial_value": "leave at the door",
    }
    assert elements["tags"]["type"] == "plain_text_input"
    assert json.loads(elements["tags"]["initial_value"]) == ["fragile"]
    assert elements["tags"]["multiline"] is True
    assert elements["order_id"]["initial_value"] == "A-1"


def test_what_may_be_left_empty_is_optional() -> None:
    inputs = _inputs(_modal())
    optional = {bid.removeprefix("edit:") for bid, b in inputs.items() if b["optional"]}
    # a text may be emptied; what may be null may be left empty (limit was not proposed)
    assert optional == {"order_id", "note", "tags", "limit"}
    assert inputs["edit:limit"]["element"] == {
        "action_id": "value",
        "type": "number_input",
        "is_decimal_allowed": False,
    }
    assert inputs["edit:tags"]["hint"]["text"] == "As JSON."
    # a nullable tags list offers no "Not set" option: it is a JSON input, emptied for null
    assert "options" not in inputs["edit:tags"]["element"]


def test_slacks_limits_hold_for_long_names_values_and_many_choices() -> None:
    long_name = "n" * 2500
    schema = {
        "properties": {
            long_name: {"type": "string", "description": "d" * 2500},
            "essay": {"type": "string"},
            "blob": {"type": "array"},
            "many": {"enum": [f"v{i}" for i in range(150)], "type": "string"},
            "wide": {"enum": ["x" * 200, "y"], "type": "string"},
            "short": {"type": "string", "maxLength": 10, "minLength": 2},
        }
    }
    fields = fields_of(schema, list(schema["properties"]))
    proposed = {
        long_name: "v",
        "essay": "e" * (MAX_TEXT + 1),
        "blob": [7] * 700,
        "many": "v3",
        "wide": "y",
        "short": "abc",
    }
    view = edit_modal("p" * 5000, "sealed", fields, proposed)
    assert view_problem(view, kind="modal") is None
    inputs = _inputs(view)
    long_block = inputs[block_id_of(long_name)]
    assert len(block_id_of(long_name)) <= 255
    assert len(long_block["label"]["text"]) == 2000
    assert len(long_block["hint"]["text"]) == 2000
    assert "edit:essay" not in inputs  # too long for a text input: not offered
    assert "`essay`" in json.dumps(view["blocks"])
    blob = inputs["edit:blob"]["element"]["initial_value"]
    assert len(blob) <= MAX_TEXT
    assert json.loads(blob) == proposed["blob"]  # compact JSON where the indented is too long
    # 150 choices, or one too long for an option's value: a text input instead
    assert inputs["edit:many"]["element"]["type"] == "plain_text_input"
    assert inputs["edit:wide"]["element"]["type"] == "plain_text_input"
    short = inputs["edit:short"]["element"]
    assert (short["min_length"], short["max_length"]) == (2, 10)


def test_a_modal_holds_at_most_its_fields_and_block_ids_stay_unique() -> None:
    names = [f"a{i}" for i in range(MAX_FIELDS + 5)]
    schema = {"properties": {name: {"type": "integer"} for name in names}}
    view = edit_modal("p", "m", fields_of(schema, names), {name: 1 for name in names})
    assert view_problem(view, kind="modal") is None
    assert len(_inputs(view)) == MAX_FIELDS
    assert "`a94`" in json.dumps(view["blocks"])


def test_a_nullable_choice_offers_not_set_and_bounds_round_to_whole_numbers() -> None:
    schema = {
        "properties": {
            "level": {"anyOf": [{"enum": [1, 2], "type": "integer"}, {"type": "null"}]},
            "size": {"type": "integer", "minimum": 0.5, "maximum": 7.9},
            "odd": {"type": "integer", "minimum": 0.2, "maximum": 0.8},
        }
    }
    fields = fields_of(schema, ["level", "size", "odd"])
    level = input_block(fields[0], {"level": None})
    assert level is not None
    options = level["element"]["options"]
    assert [o["text"]["text"] for o in options] == ["1", "2", "Not set"]
    assert level["element"]["initial_option"] == options[-1]
    size = input_block(fields[1], {"size": 3})
    assert size is not None
    assert (size["element"]["min_value"], size["element"]["max_value"]) == ("1", "7")
    odd = input_block(fields[2], {})
    assert odd is not None
    assert "min_value" not in odd["element"]  # no whole number fits: the engine says so


# the submission ------------------------------------------------------------------------------


def test_an_untouched_submission_changes_nothing() -> None:
    view = _modal()
    assert edits_of(_submitted(view, {}), FIELDS, PROPOSED) == ({}, {})


def test_an_argument_the_call_left_out_shows_the_tools_default() -> None:
    proposed = {k: v for k, v in PROPOSED.items() if k not in ("reason", "price")}
    view = _modal(proposed)
    inputs = _inputs(view)
    assert inputs["edit:reason"]["element"]["initial_option"]["value"] == '"late"'
    assert inputs["edit:price"]["element"]["initial_value"] == "9.5"
    assert edits_of(_submitted(view, {}), FIELDS, proposed) == ({}, {})
    changed = _submitted(view, {"reason": "damaged"})
    assert edits_of(changed, FIELDS, proposed) == ({"reason": "damaged"}, {})


def test_a_submission_reads_each_element_back_as_its_type() -> None:
    view = _modal()
    entered = {
        "count": "40",
        "price": "12.25",
        "speed": "express",
        "reason": "damaged",
        "gift": "Yes",
        "tags": '["fragile", "heavy"]',
        "limit": "5",
        "note": "",
    }
    edits, errors = edits_of(_submitted(view, entered), FIELDS, PROPOSED)
    assert errors == {}
    assert edits == {
        "count": 40,
        "price": 12.25,
        "speed": "express",
        "reason": "damaged",
        "gift": True,
        "tags": ["fragile", "heavy"],
        "limit": 5,
        "note": "",
    }


def test_emptied_inputs_mean_null_where_allowed_and_nothing_else() -> None:
    view = _modal()
    edits, errors = edits_of(_submitted(view, {"tags": "", "limit": None}), FIELDS, PROPOSED)
    assert (edits, errors) == ({"tags": None}, {})  # limit was not proposed: still not set


def test_what_cannot_be_read_is_each_inputs_error() -> None:
    view = _modal()
    forged = {"text": {"type": "plain_text", "text": "rocket"}, "value": '"rocket"'}
    entered = {"count": "4.5", "price": "abc", "tags": "[oops", "speed": forged}
    edits, errors = edits_of(_submitted(view, entered), FIELDS, PROPOSED)
    assert edits == {}
    assert errors == {
        "edit:count": "Enter a whole number.",
        "edit:price": "Enter a number.",
        "edit:tags": "Enter the value as JSON (Expecting value).",
        "edit:speed": "Choose one of the options.",
    }


# the engine's refusal, and what changed ------------------------------------------------------

REF = ApprovalRef(kind="confirm", session="s", turn_id="t", ident="c1", digest="d")
OPENED = Opened(
    ref=REF,
    principal={"team": "T1", "enterprise": None, "user": "U1"},
    channel="C1",
    message_ts="1.3",
    thread_ts="1.2",
    home=False,
    opened_at=1.0,
)
BLOCKS = {field.name: field.block_id for field in FIELDS}


def test_a_refused_edit_is_shown_under_each_input_and_a_general_one_under_the_first() -> None:
    click = Click.editing(OPENED, {"count": 0}, None, BLOCKS)
    rejected = EditRejected("not valid", {"count": "must be > 0", "other": "unknown"})
    assert click.modal_errors(rejected) == {
        "edit:count": "must be > 0",
        "edit:order_id": "other: unknown",
    }
    general = ResumeValidationError("a request that needs several approvals cannot be edited")
    assert click.modal_errors(general) == {"edit:order_id": str(general)}
    plain = Click.editing(OPENED, None, None, {})
    assert plain.modal_errors(general) == {}  # no inputs: told as any refusal is


def test_what_changed_reads_as_the_engine_tells_the_model() -> None:
    changes = approved_changes(ship, PROPOSED, {"count": 40.0, "note": "x"})
    assert changes == {"count": (3, 40), "note": ("leave at the door", "x")}
    assert changes_text(changes) == 'count from 3 to 40, note from "leave at the door" to "x"'
    assert approved_changes(ship, PROPOSED, {"count": 0}) is None
    assert approved_changes(ship, PROPOSED, {"count": 3.0}) == {}
    assert changes_text({}) is None
    assert changes_text({"limit": (None, 5)}) == "limit from (not set) to 5"
    long = changes_text({f"n{i}": ("a" * 3000, "b" * 3000) for i in range(20)})
    assert long is not None
    assert len(long) <= MAX_CHANGES
    assert long.startswith(f'n0 from "{"a" * (MAX_SHOWN - 2)}…')
    assert argument_changes(PROPOSED, {**PROPOSED, "gift": True}) == {"gift": (False, True)}
    assert argument_changes(PROPOSED, None) == {}
    event = {"count": {"from": 3, "to": 40}, "bad": "x"}
    assert event_changes(event) == {"count": (3, 40)}


# the stand-in's rules for the new elements ---------------------------------------------------


def _one(element: dict[str, Any]) -> str | None:
    view = {
        "type": "modal",
        "title": {"type": "plain_text", "text": "t"},
        "submit": {"type": "plain_text", "text": "s"},
        "blocks": [
            {
                "type": "input",
                "block_id": "b",
                "label": {"type": "plain_text", "text": "l"},
                "element": {"action_id": "a", **element},
            }
        ],
    }
    found = view_problem(view, kind="modal")
    return found[1] if found else None


@pytest.mark.parametrize(
    ("element", "problem"),
    [
        ({"type": "number_input"}, "is_decimal_allowed is a required boolean"),
        ({"type": "number_input", "is_decimal_allowed": False, "initial_value": "4.5"}, "whole"),
        ({"type": "number_input", "is_decimal_allowed": True, "initial_value": 4}, "a number"),
        (
            {
                "type": "number_input",
                "is_decimal_allowed": True,
                "min_value": "5",
                "max_value": "1",
            },
            "min_value is greater than max_value",
        ),
        ({"type": "plain_text_input", "initial_value": "x" * 3001}, "initial_value"),
        ({"type": "plain_text_input", "initial_value": "abc", "max_length": 2}, "initial_value"),
    ],
)
def test_the_standin_refuses_number_and_text_inputs_slack_would(
    element: dict[str, Any], problem: str
) -> None:
    found = _one(element)
    assert found is not None
    assert problem in found


def test_the_standin_takes_valid_number_inputs() -> None:
    decimal = {"type": "number_input", "is_decimal_allowed": True, "initial_value": "-2.5"}
    assert _one(decimal) is None
    whole = {"type": "number_input", "is_decimal_allowed": False, "min_value": "-3"}
    assert _one(whole) is None
