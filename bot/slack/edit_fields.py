"""The inputs of the "Edit & approve" modal (`bot.slack.edit_modal`): one per editable argument,
its element chosen from the tool's JSON schema, prefilled with the proposed value, and how what
a person submitted in it is read back.

- an integer or a number: `number_input` (decimals only for a number; the schema's inclusive
  `minimum` / `maximum` as its bounds);
- a choice (`enum`, up to 99 values short enough for an option): `static_select`;
- a boolean: `radio_buttons`, Yes / No;
- a string: `plain_text_input` (its `minLength` / `maxLength` as the element's, up to Slack's
  3,000);
- anything else (lists, objects, unions): `plain_text_input` holding JSON, decoded on submit.

An argument that may be null can be left empty (or "Not set") for null. Limits are Slack's
(https://docs.slack.dev/reference/block-kit/blocks/input-block, .../block-elements): a label
and a hint of at most 2,000 characters, an option's text 75 and value 150, at most 100 options,
a text input's value at most 3,000 (a longer value is not offered: `input_block` gives None).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent.seams import JsonValue

VALUE_ACTION = "value"
MAX_TEXT = 3000
"""A `plain_text_input`'s longest value (its `max_length` is at most 3,000)."""
MAX_LABEL = 2000
MAX_OPTIONS, MAX_OPTION_VALUE, MAX_OPTION_TEXT = 100, 150, 75
Kind = Literal["integer", "number", "boolean", "choice", "text", "json"]
INTEGER = re.compile(r"[+-]?\d+")


@dataclass(frozen=True, kw_only=True)
class EditField:
    """One editable argument, as the modal shows it."""

    name: str
    kind: Kind
    nullable: bool = False
    choices: tuple[JsonValue, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    description: str | None = None
    has_default: bool = False
    default: JsonValue = None
    """What the tool takes where the call leaves the argument out (`has_default`)."""

    @property
    def block_id(self) -> str:
        return block_id_of(self.name)

    def proposed(self, arguments: Mapping[str, Any]) -> tuple[bool, Any]:
        """Whether the call has a value for the argument, and which: the one proposed, else
        the tool's default (what it runs with unless edited)."""
        if self.name in arguments:
            return True, arguments[self.name]
        return self.has_default, self.default


def block_id_of(name: str) -> str:
    """The input block of an argument: unique, and within Slack's 255 characters."""
    if len(name) <= 200:
        return f"edit:{name}"
    return "edit#" + hashlib.sha256(name.encode()).hexdigest()


def _resolved(schema: Mapping[str, Any], prop: Any) -> tuple[dict[str, Any], bool]:
    """The argument's schema (an `Optional`'s other half, a `$ref` followed into `$defs`) and
    whether it may be null."""
    node = dict(prop) if isinstance(prop, Mapping) else {}
    nullable = False
    for union in ("anyOf", "oneOf"):
        options = node.get(union)
        if not isinstance(options, list):
            continue
        rest = [o for o in options if not (isinstance(o, Mapping) and o.get("type") == "null")]
        nullable = nullable or len(rest) < len(options)
        if len(rest) == 1 and isinstance(rest[0], Mapping):
            node = {**{k: v for k, v in node.items() if k != union}, **rest[0]}
    ref = node.get("$ref")
    defs = schema.get("$defs")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and isinstance(defs, Mapping):
        target = defs.get(ref.removeprefix("#/$defs/"))
        if isinstance(target, Mapping):
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    kind = node.get("type")
    if isinstance(kind, list):
        nullable = nullable or "null" in kind
        others = [t for t in kind if t != "null"]
        node["type"] = others[0] if len(others) == 1 else None
    return node, nullable


def _kind(node: Mapping[str, Any]) -> Kind:
    enum = node.get("enum")
    if isinstance(enum, list) and enum:
        values = [v for v in enum if v is not None]
        if (
            values
            and len(values) < MAX_OPTIONS
            and all(len(json.dumps(v)) <= MAX_OPTION_VALUE for v in values)
        ):
            return "choice"
    match node.get("type"):
        case "integer":
            return "integer"
        case "number":
            return "number"
        case "boolean":
            return "boolean"
        case "string":
            return "text"
        case _:
            return "json"


def _bound(value: Any) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def _length(value: Any) -> int | None:
    return value if isinstance(value, int) and 0 <= value <= MAX_TEXT else None


def fields_of(schema: Mapping[str, Any], editable: Sequence[str]) -> list[EditField]:
    """The inputs for a tool's editable arguments, from its input JSON schema."""
    properties = schema.get("properties")
    found: list[EditField] = []
    for name in editable:
        prop = properties.get(name) if isinstance(properties, Mapping) else None
        node, nullable = _resolved(schema, prop)
        kind = _kind(node)
        enum = node.get("enum")
        listed = enum if isinstance(enum, list) else []
        choices = tuple(v for v in listed if v is not None) if kind == "choice" else ()
        said = node.get("description")
        found.append(
            EditField(
                name=name,
                kind=kind,
                nullable=nullable or None in listed,
                choices=choices,
                minimum=_bound(node.get("minimum")),
                maximum=_bound(node.get("maximum")),
                min_length=_length(node.get("minLength")),
                max_length=_length(node.get("maxLength")),
                description=said if isinstance(said, str) and said.strip() else None,
                has_default="default" in node,
                default=node.get("default"),
            )
        )
    return found


# the inputs -----------------------------------------------------------------------------------


def plain(text: str) -> dict[str, Any]:
    return {"type": "plain_text", "text": text}


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else repr(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _option(text: str, value: JsonValue) -> dict[str, Any]:
    shown = text if isinstance(text, str) and text else "(empty)"
    return {"text": plain(cut(shown, MAX_OPTION_TEXT)), "value": json.dumps(value)}


def _options(field: EditField) -> list[dict[str, Any]]:
    if field.kind == "boolean":
        options = [_option("Yes", True), _option("No", False)]
    else:
        options = [_option(v if isinstance(v, str) else json.dumps(v), v) for v in field.choices]
    if field.nullable:
        options.append(_option("Not set", None))
    return options


def _json_text(value: JsonValue) -> str:
    pretty = json.dumps(value, ensure_ascii=False, indent=2)
    return pretty if len(pretty) <= MAX_TEXT else json.dumps(value, ensure_ascii=False)


def _element(field: EditField, present: bool, value: Any) -> dict[str, Any] | None:
    """The input's element, prefilled with `value`; None where the value cannot be shown in
    one (a text over 3,000 characters)."""
    element: dict[str, Any] = {"action_id": VALUE_ACTION}
    match field.kind:
        case "integer" | "number":
            element |= {"type": "number_input", "is_decimal_allowed": field.kind == "number"}
            whole = _is_number(value) and float(value).is_integer()
            if present and _is_number(value) and (field.kind == "number" or whole):
                element["initial_value"] = _number_text(value)
            low, high = field.minimum, field.maximum
            if field.kind == "integer":
                low = math.ceil(low) if low is not None else None
                high = math.floor(high) if high is not None else None
            if low is not None and high is not None and low > high:
                low = high = None  # no whole number fits: the engine says so on submit
            if low is not None:
                element["min_value"] = _number_text(low)
            if high is not None:
                element["max_value"] = _number_text(high)
        case "boolean" | "choice":
            options = _options(field)
            element |= {"type": "radio_buttons" if field.kind == "boolean" else "static_select"}
            element["options"] = options
            if field.kind == "choice":
                element["placeholder"] = plain("Choose")
            chosen = json.dumps(value) if present else None
            initial = next((o for o in options if o["value"] == chosen), None)
            if initial is not None:
                element["initial_option"] = initial
        case "text" | "json":
            element["type"] = "plain_text_input"
            text = None
            if present and value is not None:
                text = value if field.kind == "text" and isinstance(value, str) else None
                text = _json_text(value) if text is None else text
            if text is not None and len(text) > MAX_TEXT:
                return None
            if text:
                element["initial_value"] = text
            long = text is not None and ("\n" in text or len(text) > 80)
            if field.kind == "json" or long:
                element["multiline"] = True
            if field.kind == "text":
                most = field.max_length if field.max_length is not None else MAX_TEXT
                if field.max_length is not None:
                    element["max_length"] = most
                if field.min_length is not None and field.min_length <= most:
                    element["min_length"] = field.min_length
    return element


def input_block(field: EditField, proposed: Mapping[str, Any]) -> dict[str, Any] | None:
    """The argument's input block, prefilled as proposed; None where its value is too long to
    show in one."""
    present, value = field.proposed(proposed)
    element = _element(field, present, value)
    if element is None:
        return None
    filled = "initial_value" in element or "initial_option" in element
    block: dict[str, Any] = {
        "type": "input",
        "block_id": field.block_id,
        "label": plain(cut(field.name, MAX_LABEL)),
        "element": element,
        # Empty is a value of its own for a text, and null for what may be null; anything else
        # left empty (nothing was proposed for it) stays as proposed.
        "optional": field.kind == "text" or field.nullable or not filled,
    }
    hint = field.description or ("As JSON." if field.kind == "json" else None)
    if hint:
        block["hint"] = plain(cut(hint, MAX_LABEL))
    return block


# what was submitted ------------------------------------------------------------------------------


class Invalid(ValueError):
    """What a field's input cannot be read as (its error in the modal)."""


def _state(view: Mapping[str, Any], block_id: str) -> Mapping[str, Any] | None:
    state = view.get("state")
    values = state.get("values") if isinstance(state, Mapping) else None
    block = values.get(block_id) if isinstance(values, Mapping) else None
    field = block.get(VALUE_ACTION) if isinstance(block, Mapping) else None
    return field if isinstance(field, Mapping) else None


def _number(field: EditField, text: str) -> int | float:
    try:
        if field.kind == "integer" and INTEGER.fullmatch(text.strip()):
            return int(text)
        number = float(text)
    except ValueError:
        raise Invalid("Enter a number.") from None
    if not math.isfinite(number):
        raise Invalid("Enter a number.")
    if field.kind == "integer":
        if not number.is_integer():
            raise Invalid("Enter a whole number.")
        return int(number)
    return number


def _read(field: EditField, state: Mapping[str, Any], proposed: Any, present: bool) -> Any:
    """The value a field's state holds; `...` where it says to keep what was proposed."""
    if field.kind in ("boolean", "choice"):
        option = state.get("selected_option")
        chosen = option.get("value") if isinstance(option, Mapping) else None
        if not isinstance(chosen, str):
            return None if field.nullable else ...
        allowed = {o["value"] for o in _options(field)}
        if chosen not in allowed:
            raise Invalid("Choose one of the options.")
        return json.loads(chosen)
    text = state.get("value")
    text = text if isinstance(text, str) else ""
    if field.kind == "text":
        if text:
            return text
        if not present:
            return ...
        return "" if proposed == "" or not field.nullable else None
    if not text.strip():
        return None if field.nullable else ...
    if field.kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise Invalid(f"Enter the value as JSON ({err.msg}).") from None
    return _number(field, text)


def same(a: Any, b: Any) -> bool:
    """Equal as JSON (so True is not 1, and 40 is 40.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def submitted(view: Mapping[str, Any], field: EditField, proposed: Mapping[str, Any]) -> Any:
    """What a submission (`view.state.values`) changed the argument to; `...` where it keeps
    what was proposed (unchanged, or not offered). Raises `Invalid` for an input it cannot
    read."""
    state = _state(view, field.block_id)
    if state is None:
        return ...  # not offered (too long to edit here): runs as proposed
    present, old = field.proposed(proposed)
    value = _read(field, state, old, present)
    if value is ... or (not present and value is None) or (present and same(value, old)):
        return ...
    return value
