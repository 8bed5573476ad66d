"""Edit, then approve: a person approving a proposed write may change the fields the tool marks
editable (`@tool(editable=...)`), and the call then runs with exactly what they approved.

The edit is checked before anything is written: only editable fields, and the whole call must
still validate against the tool's input model (the same check the model's own arguments pass),
so an edit that breaks the schema is refused with each field's error (`EditRejected`, a 422 the
Slack modal shows under its field) and the proposal keeps waiting. What runs is the proposal
with the edited fields replaced, each as the input model reads it (the text "40" in an integer
field runs as 40): the receipt's fingerprint is that of those arguments, and the model reads
what was changed, by whom, from what. An edit that changes nothing is a plain approval.

An edit is one person's call, so a proposal that needs several approvals (`Quorum`) cannot be
edited: the others would have approved something else. A `confirmation="capability"` tool
checks its own details when it runs again, so it has nothing here to edit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from agent._errors import ResumeValidationError
from agent._messages import JsonValue

EditableInput = bool | Sequence[str] | None
"""`@tool(editable=)`: True for every field of the input, or the names of those a person may
change before approving; None (or False) for none."""

NOT_EDITABLE = "this request cannot be edited; approve or deny it as proposed"
QUORUM_EDIT = "a request that needs several approvals cannot be edited; deny it with a reason"


class EditableTool(Protocol):
    """What an edit needs of the tool (`agent._tools.Tool`, which declares it)."""

    @property
    def editable(self) -> tuple[str, ...]: ...
    @property
    def input_model(self) -> type[BaseModel]: ...


class EditRejected(ResumeValidationError):
    """The edited call does not fit the tool (`fields`: each field's error, by name); nothing
    was applied."""

    def __init__(self, message: str, fields: Mapping[str, str]) -> None:
        super().__init__(message)
        self.fields = dict(fields)


@dataclass(frozen=True)
class Edit:
    """What an approval with edits runs, and what it changed (field → (proposed, approved))."""

    arguments: dict[str, Any]
    changes: dict[str, tuple[JsonValue, JsonValue]]

    def changes_json(self) -> dict[str, JsonValue]:
        """The changes as the event and the API carry them: `{field: {"from": …, "to": …}}`."""
        return {k: {"from": old, "to": new} for k, (old, new) in self.changes.items()}


def editable_fields(
    editable: EditableInput, schema: Mapping[str, Any], *, what: str
) -> tuple[str, ...]:
    """The fields a declaration lets a person change, checked against the input's JSON schema;
    `ValueError` saying what is wrong (the caller makes it an `AssemblyError`)."""
    if editable is None or editable is False:
        return ()
    properties = schema.get("properties")
    fields = list(properties) if isinstance(properties, dict) else []
    if editable is True:
        if not fields:
            raise ValueError(f"{what}: editable=True, but the tool takes no arguments")
        return tuple(fields)
    if isinstance(editable, str) or not isinstance(editable, Sequence):
        raise ValueError(f"{what}: editable must be True or a list of argument names")
    unknown = [name for name in editable if name not in fields]
    if unknown or not editable:
        raise ValueError(
            f"{what}: editable names {', '.join(map(repr, unknown)) or 'no argument'}, "
            f"which the tool does not take (it takes {', '.join(fields) or 'none'})"
        )
    return tuple(dict.fromkeys(editable))


def apply_edits(
    tool: EditableTool | None, proposed: Mapping[str, Any], edits: object
) -> Edit | None:
    """The call an approval with `edits` of the `proposed` call runs; None when the edits
    change nothing. Raises `ResumeValidationError` (`EditRejected` naming the fields) when they
    cannot be applied. A surface may call it to say what an edit will change before it
    answers; the engine calls it again when the answer is given."""
    if not isinstance(edits, Mapping) or not all(isinstance(k, str) for k in edits):
        raise ResumeValidationError("the edits must be an object of argument names to values")
    if tool is None or not tool.editable:
        raise ResumeValidationError(NOT_EDITABLE)
    locked = {name: "This field cannot be changed." for name in edits if name not in tool.editable}
    if locked:
        raise EditRejected(f"only {', '.join(tool.editable)} may be changed", locked)
    merged = {**proposed, **edits}
    try:
        parsed = tool.input_model.model_validate(merged)
    except ValidationError as err:
        fields: dict[str, str] = {}
        for problem in err.errors(include_url=False, include_input=False):
            where = problem["loc"][0] if problem["loc"] else ""
            fields.setdefault(str(where), str(problem["msg"]))
        said = "; ".join(f"{k}: {v}" if k else v for k, v in fields.items())
        raise EditRejected(f"the edited call is not valid: {said}", fields) from None
    read = parsed.model_dump(mode="json")
    approved = {**proposed, **{name: read[name] for name in edits if name in read}}
    changes = {
        name: (proposed.get(name), approved[name])
        for name in edits
        if name in approved and not same_json(approved[name], proposed.get(name))
    }
    return Edit(arguments=approved, changes=changes) if changes else None


def same_json(a: object, b: object) -> bool:
    """Equal as JSON values: 40 is 40.0, but True is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


MAX_SHOWN = 200
"""A changed value's characters at most in `changes_text` (the whole call is quoted beside it)."""


def changes_text(changes: Mapping[str, tuple[JsonValue, JsonValue]]) -> str:
    """ "amount from 400 to 40, note from "x" to "y"": what an edit changed, as the model and
    the thread read it (a long value cut short)."""
    return ", ".join(
        f"{name} from {_shown(old)} to {_shown(new)}" for name, (old, new) in changes.items()
    )


def _shown(value: JsonValue) -> str:
    if value is None:
        return "(not set)"
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"
