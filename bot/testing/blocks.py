"""Block Kit as Slack checks it: a message's or a view's blocks that Slack would refuse with
`invalid_blocks`, and views it would refuse with `invalid_arguments` or `view_too_large`.

Only what Slack's Block Kit reference states as a rule is checked (required fields, the types a
field takes, documented lengths and counts), for the blocks and elements the bot sends:
https://docs.slack.dev/reference/block-kit/blocks,
https://docs.slack.dev/reference/block-kit/block-elements,
https://docs.slack.dev/reference/block-kit/composition-objects,
https://docs.slack.dev/reference/views (a modal's title, submit and close; 100 blocks; 3,000
characters of `private_metadata`; a view's JSON at most 250 kB, per `views.publish`'s
`view_too_large`). A block type it does not know is refused: better a test that fails on a new
block than one that passes on a block Slack would not render.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

MAX_BLOCKS = 50
"""A message holds at most 50 blocks (https://docs.slack.dev/reference/block-kit/blocks)."""
MAX_VIEW_BLOCKS = 100
MAX_VIEW_BYTES = 250_000
MAX_PRIVATE_METADATA = 3000


def _plain(value: Any, limit: int) -> str | None:
    if not isinstance(value, dict) or value.get("type") != "plain_text":
        return "not a plain_text object"
    text = value.get("text")
    if not isinstance(text, str) or not text or len(text) > limit:
        return f"plain_text of 1 to {limit} characters"
    return None


def _text(value: Any, limit: int) -> str | None:
    if not isinstance(value, dict) or value.get("type") not in ("plain_text", "mrkdwn"):
        return "not a text object"
    text = value.get("text")
    if not isinstance(text, str) or not text or len(text) > limit:
        return f"text of 1 to {limit} characters"
    return None


def _action_id(element: dict[str, Any]) -> str | None:
    action_id = element.get("action_id")
    if action_id is not None and (not isinstance(action_id, str) or len(action_id) > 255):
        return "action_id over 255 characters"
    return None


def _button(element: dict[str, Any]) -> str | None:
    found = _plain(element.get("text"), 75) or _action_id(element)
    if found:
        return f"button: {found}"
    value = element.get("value")
    if value is not None and (not isinstance(value, str) or len(value) > 2000):
        return "button: value over 2,000 characters"
    if element.get("style") not in (None, "primary", "danger"):
        return "button: unknown style"
    confirm = element.get("confirm")
    if confirm is not None:
        for name, limit in (("title", 100), ("confirm", 30), ("deny", 30)):
            if _plain(confirm.get(name), limit) if isinstance(confirm, dict) else True:
                return f"button: confirm.{name}"
        if _text(confirm.get("text"), 300):
            return "button: confirm.text"
    return None


def _feedback_buttons(element: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/block-elements/feedback-buttons-element"""
    for name in ("positive_button", "negative_button"):
        button = element.get(name)
        if not isinstance(button, dict) or _plain(button.get("text"), 75):
            return f"feedback_buttons: {name}.text"
        value = button.get("value")
        if not isinstance(value, str) or not value or len(value) > 2000:
            return f"feedback_buttons: {name}.value"
    return _action_id(element)


def _plain_text_input(element: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/block-elements/plain-text-input-element: a
    string `initial_value`, no longer than the `max_length` a person could type (3,000 at
    most)."""
    low, high = element.get("min_length", 0), element.get("max_length", 3000)
    if not (isinstance(low, int) and isinstance(high, int) and 0 <= low <= high <= 3000):
        return "plain_text_input: min_length / max_length"
    initial = element.get("initial_value")
    if initial is not None and (not isinstance(initial, str) or len(initial) > high):
        return f"plain_text_input: initial_value is a string of at most {high} characters"
    if not isinstance(element.get("multiline", False), bool):
        return "plain_text_input: multiline is a boolean"
    placeholder = element.get("placeholder")
    if placeholder is not None and _plain(placeholder, 150):
        return "plain_text_input: placeholder"
    return _action_id(element)


def _number(value: Any, *, decimal: bool) -> float | None:
    """A number input's value: a string holding a number (a whole one unless decimals are
    allowed); None if it is not one."""
    if not isinstance(value, str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number) or (not decimal and not re.fullmatch(r"-?\d+", value)):
        return None
    return number


def _number_input(element: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/block-elements/number-input-element:
    `is_decimal_allowed` required; `initial_value`, `min_value` and `max_value` strings holding
    numbers (whole ones unless decimals are allowed), the minimum not above the maximum."""
    decimal = element.get("is_decimal_allowed")
    if not isinstance(decimal, bool):
        return "number_input: is_decimal_allowed is a required boolean"
    read: dict[str, float] = {}
    for name in ("initial_value", "min_value", "max_value"):
        if name not in element:
            continue
        number = _number(element[name], decimal=decimal)
        if number is None:
            kind = "a number" if decimal else "a whole number"
            return f"number_input: {name} is a string holding {kind}"
        read[name] = number
    if read.get("min_value", -math.inf) > read.get("max_value", math.inf):
        return "number_input: min_value is greater than max_value"
    placeholder = element.get("placeholder")
    if placeholder is not None and _plain(placeholder, 150):
        return "number_input: placeholder"
    return _action_id(element)


def _option(option: Any, *, plain_only: bool) -> str | None:
    """https://docs.slack.dev/reference/block-kit/composition-objects/option-object: `text` of
    at most 75 characters (plain_text in a select menu), `value` of at most 150."""
    if not isinstance(option, dict):
        return "an option that is not an object"
    text = option.get("text")
    if (_plain(text, 75) if plain_only else _text(text, 75)) is not None:
        return "an option's text"
    value = option.get("value")
    if not isinstance(value, str) or not value or len(value) > 150:
        return "an option's value of 1 to 150 characters"
    description = option.get("description")
    if description is not None and _plain(description, 75):
        return "an option's description"
    return None


def _options(element: dict[str, Any], limit: int, *, plain_only: bool) -> str | None:
    options = element.get("options")
    if not isinstance(options, list) or not 0 < len(options) <= limit:
        return f"1 to {limit} options"
    found = next((f for o in options if (f := _option(o, plain_only=plain_only))), None)
    if found:
        return found
    initial = element.get("initial_option")
    if initial is not None and initial not in options:
        return "an initial_option that is not exactly one of its options"
    return _action_id(element)


def _radio_buttons(element: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/block-elements/radio-button-group-element"""
    found = _options(element, 10, plain_only=False)
    return f"radio_buttons: {found}" if found else None


def _static_select(element: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/block-elements/select-menu-element (static
    options only: this stand-in does not take `option_groups`)."""
    placeholder = element.get("placeholder")
    if placeholder is not None and _plain(placeholder, 150):
        return "static_select: placeholder"
    found = _options(element, 100, plain_only=True)
    return f"static_select: {found}" if found else None


ELEMENTS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "button": _button,
    "feedback_buttons": _feedback_buttons,
    "plain_text_input": _plain_text_input,
    "number_input": _number_input,
    "radio_buttons": _radio_buttons,
    "static_select": _static_select,
}
INPUT_ELEMENTS = ("plain_text_input", "number_input", "radio_buttons", "static_select")
"""What an input block may hold here (Slack takes more; these are the ones the bot sends)."""


def _element(element: Any, allowed: tuple[str, ...]) -> str | None:
    if not isinstance(element, dict) or element.get("type") not in allowed:
        return f"an element that is not one of {', '.join(allowed)}"
    return ELEMENTS[element["type"]](element)


def _section(block: dict[str, Any]) -> str | None:
    text, fields = block.get("text"), block.get("fields")
    if text is None and fields is None:
        return "section: needs text or fields"
    if text is not None and _text(text, 3000):
        return "section: text of 1 to 3,000 characters"
    if fields is not None and (
        not isinstance(fields, list)
        or not 0 < len(fields) <= 10
        or any(_text(f, 2000) for f in fields)
    ):
        return "section: fields"
    accessory = block.get("accessory")
    return _element(accessory, ("button",)) if accessory is not None else None


def _header(block: dict[str, Any]) -> str | None:
    return "header: text" if _plain(block.get("text"), 150) else None


def _markdown(block: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/blocks/markdown-block (12,000 characters)."""
    text = block.get("text")
    return None if isinstance(text, str) and 0 < len(text) <= 12_000 else "markdown: text"


def _context(block: dict[str, Any]) -> str | None:
    elements = block.get("elements")
    if not isinstance(elements, list) or not 0 < len(elements) <= 10:
        return "context: 1 to 10 elements"
    return "context: an element" if any(_text(e, 3000) for e in elements) else None


def _actions(block: dict[str, Any]) -> str | None:
    elements = block.get("elements")
    if not isinstance(elements, list) or not 0 < len(elements) <= 25:
        return "actions: 1 to 25 elements"
    return next((f for e in elements if (f := _element(e, ("button",)))), None)


def _context_actions(block: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/blocks/context-actions-block"""
    elements = block.get("elements")
    if not isinstance(elements, list) or not 0 < len(elements) <= 5:
        return "context_actions: 1 to 5 elements"
    return next((f for e in elements if (f := _element(e, ("feedback_buttons",)))), None)


def _divider(block: dict[str, Any]) -> str | None:
    return None


TASK_STATUSES = ("pending", "in_progress", "complete", "error")


def _task_card(block: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/blocks/task-card-block: `task_id` and a plain
    text `title` required; `status` one of four; `details` / `output` a single `rich_text`."""
    for name in ("task_id", "title"):
        value = block.get(name)
        if not isinstance(value, str) or not value:
            return f"task_card: {name}"
    if "status" in block and block["status"] not in TASK_STATUSES:
        return "task_card: status"
    for name in ("details", "output"):
        value = block.get(name)
        if value is not None and (
            not isinstance(value, dict)
            or value.get("type") != "rich_text"
            or not isinstance(value.get("elements"), list)
            or not value["elements"]
        ):
            return f"task_card: {name} is a single rich_text object"
    return None


def tasks_shown(blocks: Any) -> dict[str, dict[str, Any]]:
    """The task cards among a message's blocks, as the stand-in keeps a stream's tasks (id,
    title, status, output as text with its mentions as `<@U…>`)."""
    found: dict[str, dict[str, Any]] = {}
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, dict) or block.get("type") != "task_card":
            continue
        task = {"id": block["task_id"], "title": block["title"], "status": block.get("status")}
        for name in ("details", "output"):
            if isinstance(block.get(name), dict):
                task[name] = _rich_text_words(block[name])
        found[str(block["task_id"])] = task
    return found


def _rich_text_words(value: dict[str, Any]) -> str:
    words: list[str] = []
    for section in value.get("elements", []):
        for element in section.get("elements", []) if isinstance(section, dict) else []:
            if element.get("type") == "user":
                words.append(f"<@{element.get('user_id')}>")
            else:
                words.append(str(element.get("text", "")))
    return "".join(words)


def _input(block: dict[str, Any]) -> str | None:
    """https://docs.slack.dev/reference/block-kit/blocks/input-block"""
    if _plain(block.get("label"), 2000):
        return "input: label"
    hint = block.get("hint")
    if hint is not None and _plain(hint, 2000):
        return "input: hint"
    if not isinstance(block.get("optional", False), bool):
        return "input: optional is a boolean"
    return _element(block.get("element"), INPUT_ELEMENTS)


BLOCKS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "section": _section,
    "header": _header,
    "markdown": _markdown,
    "context": _context,
    "actions": _actions,
    "context_actions": _context_actions,
    "divider": _divider,
    "input": _input,
    "task_card": _task_card,
}
INPUT_SURFACES = ("modal",)
"""Where an input block may appear (Home tabs and messages take none)."""


def blocks_problem(blocks: Any, *, limit: int = MAX_BLOCKS, surface: str = "message") -> str | None:
    """Why Slack would answer `invalid_blocks`, or None."""
    if not isinstance(blocks, list) or len(blocks) > limit:
        return f"blocks must be a list of at most {limit}"
    ids: set[str] = set()
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") not in BLOCKS:
            return "a block of a type this stand-in does not know"
        if block["type"] == "input" and surface not in INPUT_SURFACES:
            return "an input block outside a modal"
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or not block_id or len(block_id) > 255:
                return "a block_id over 255 characters"
            if block_id in ids:
                return f"block_id {block_id!r} used twice"
            ids.add(block_id)
        found = BLOCKS[block["type"]](block)
        if found:
            return found
    return None


def view_problem(view: Any, *, kind: str) -> tuple[str, str] | None:
    """(error code, why) Slack would answer for this view, or None. `kind`: home or modal."""
    if not isinstance(view, dict) or view.get("type") != kind:
        return "invalid_arguments", f"view.type must be {kind!r}"
    if len(json.dumps(view)) > MAX_VIEW_BYTES:
        return "view_too_large", "the view is over 250 kB"
    metadata = view.get("private_metadata", "")
    if not isinstance(metadata, str) or len(metadata) > MAX_PRIVATE_METADATA:
        return "invalid_arguments", "private_metadata over 3,000 characters"
    callback_id = view.get("callback_id", "")
    if not isinstance(callback_id, str) or len(callback_id) > 255:
        return "invalid_arguments", "callback_id over 255 characters"
    if kind == "modal":
        if _plain(view.get("title"), 24):
            return "invalid_arguments", "a modal's title is plain_text of at most 24 characters"
        for name in ("submit", "close"):
            if name in view and _plain(view[name], 24):
                return "invalid_arguments", f"a modal's {name} is plain_text of at most 24"
        blocks = view.get("blocks")
        if (
            isinstance(blocks, list)
            and any(isinstance(b, dict) and b.get("type") == "input" for b in blocks)
            and "submit" not in view
        ):
            return "invalid_arguments", "a modal with an input block needs a submit button"
    found = blocks_problem(view.get("blocks"), limit=MAX_VIEW_BLOCKS, surface=kind)
    return ("invalid_blocks", found) if found else None
