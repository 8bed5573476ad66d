"""Edit & approve: the modal an "Edit & approve" click opens, the edits its submission asks of
the engine (`session.confirm(..., edits=)`), and how a request's message says what changed.

A proposed write of a tool that lets its approver change arguments first (`@tool(editable=)`;
the `confirmation.requested` event lists them in `editable`; never on a request that needs
several approvals) gets a fourth button. Its click opens this modal (with the click's trigger,
its `private_metadata` sealed as the Deny modal's is, `bot.slack.deny_modal`): the request, and
one input per editable argument prefilled with what the model proposed (`bot.slack.edit_fields`
chooses each element from the tool's JSON schema). The submission sends what the person
changed, nothing else; the engine checks it against the tool's input model and refuses what
does not fit with each argument's error (`EditRejected`), which the modal shows under that
argument's input (`response_action: errors`), nothing applied. An edit that changes nothing is a
plain approval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent import ResumeValidationError, Tool, apply_edits
from agent import changes_text as agent_changes_text
from agent.seams import JsonValue
from bot.slack.edit_fields import EditField, Invalid, cut, input_block, plain, same, submitted

EDIT_MODAL = "agent_edit_approve"
"""The modal's `callback_id`."""
MAX_FIELDS = 90
"""Inputs in one modal at most (a modal holds 100 blocks; the prompt and notes take the rest)."""
Changes = dict[str, tuple[JsonValue, JsonValue]]
"""What an edit changed: argument → (proposed, approved)."""


def _note(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": cut(text, 3000)}]}


def edit_modal(
    prompt: str, metadata: str, fields: Sequence[EditField], proposed: Mapping[str, Any]
) -> dict[str, Any]:
    """The modal: the request, then an input per editable argument, prefilled as proposed."""
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": f"🙋 {cut(prompt, 2900)}"}}
    ]
    kept: list[str] = []
    for field in fields[:MAX_FIELDS]:
        block = input_block(field, proposed)
        if block is None:
            kept.append(field.name)
        else:
            blocks.append(block)
    kept.extend(field.name for field in fields[MAX_FIELDS:])
    if kept:
        names = ", ".join(f"`{name}`" for name in kept)
        blocks.append(_note(f"Not editable here (too long), so it runs as proposed: {names}."))
    blocks.append(
        _note("The call runs with what you approve here, and the agent is told what you changed.")
    )
    return {
        "type": "modal",
        "callback_id": EDIT_MODAL,
        "title": plain("Edit & approve"),
        "submit": plain("Approve"),
        "close": plain("Cancel"),
        "private_metadata": metadata,
        "blocks": blocks,
    }


def edits_of(
    view: Mapping[str, Any], fields: Sequence[EditField], proposed: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """From a submission's `view.state.values`: the arguments it changed (name → value), and
    the errors to show, by block id, for inputs it could not read (then nothing is sent)."""
    edits: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in fields:
        try:
            value = submitted(view, field, proposed)
        except Invalid as err:
            errors[field.block_id] = str(err)
            continue
        if value is not ...:
            edits[field.name] = value
    return edits, errors


def field_errors(
    fields: Mapping[str, str], general: str, blocks: Mapping[str, str], first: str
) -> dict[str, str]:
    """The engine's refusal as a modal's `errors`: each argument's error (`fields`, by name)
    under its input (`blocks`: name → block id), and anything else under the `first` input
    (an argument it has no input for, named; the refusal's own words where it named none)."""
    said: dict[str, list[str]] = {}
    for name, error in fields.items():
        shown = error if name in blocks or not name else f"{name}: {error}"
        said.setdefault(blocks.get(name, first), []).append(shown)
    if not said:
        said[first] = [general]
    return {block: cut("; ".join(errors), 2000) for block, errors in said.items()}


# what changed --------------------------------------------------------------------------------


def approved_changes(
    tool: Tool, proposed: Mapping[str, Any], edits: Mapping[str, Any]
) -> Changes | None:
    """What the edits change, each value as the engine will run it (`agent.apply_edits`: 40.0
    in an integer field is 40); None where it refuses them (the answer then says why)."""
    try:
        edit = apply_edits(tool, proposed, edits)
    except ResumeValidationError:
        return None
    return edit.changes if edit is not None else {}


def argument_changes(proposed: Mapping[str, Any], approved: Mapping[str, Any] | None) -> Changes:
    """What an approved call changed of the proposed one (a stored record's two calls)."""
    return {
        name: (proposed.get(name), value)
        for name, value in (approved or {}).items()
        if not same(value, proposed.get(name))
    }


def event_changes(changes: Mapping[str, Any] | None) -> Changes:
    """`confirmation.resolved`'s `changes` (`{argument: {"from": …, "to": …}}`) as pairs."""
    return {
        name: (change.get("from"), change.get("to"))
        for name, change in (changes or {}).items()
        if isinstance(change, Mapping)
    }


MAX_CHANGES = 1500
"""The changes' words at most: they end a context block's text (3,000)."""


def changes_text(changes: Mapping[str, tuple[JsonValue, JsonValue]]) -> str | None:
    """ "amount from 400 to 40", as the engine tells the model (`agent.changes_text`), cut to
    fit the message; None for no change."""
    return cut(agent_changes_text(changes), MAX_CHANGES) if changes else None
