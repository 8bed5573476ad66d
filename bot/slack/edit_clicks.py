"""An "Edit & approve" click: the modal for someone who may answer, the usual refusal for anyone
else, and the modal's submission answered as an Approve click is
(`bot.slack.approval_clicks.AnswerHandler.answer`), with the arguments the person changed.

As with "Approve & allow again" (`bot.slack.grant_clicks`), the click itself never answers: an
approval of the call as proposed is not what the person asked for. Where the modal cannot be
offered (the request is not one they may answer now, the tool allows no edits, the request needs
several approvals, no key to seal the modal with, the trigger spent), nothing is applied and the
clicker alone is told why. The submission's edits go to `session.confirm(..., edits=)`, committed
before the ack; an input the bot cannot read, or an edit the engine refuses (`EditRejected`: an
argument that breaks the tool's schema, with each one's error), is the modal's `errors` under
that argument's input, and nothing is applied.
"""

from __future__ import annotations

import logging
from typing import Any

from agent import ConfirmationRecord, ResumeValidationError, Tool
from bot.slack.clicks import Click
from bot.slack.deny_modal import Opened
from bot.slack.edit_fields import EditField, fields_of
from bot.slack.edit_modal import approved_changes, changes_text, edit_modal, edits_of
from bot.slack.modal_offers import Ack, ModalOffers

log = logging.getLogger(__name__)

NOT_EDITABLE = "this request cannot be edited; use Approve or Deny"
NO_MODAL = "I can't offer the edit here; use Approve or Deny instead"
NOT_OPENED = "I couldn't open the edit in time; nothing was changed. Please click again."


class EditOffers(ModalOffers):
    """The "Edit & approve" half of an `AnswerHandler`."""

    async def offer(self, click: Click, ack: Ack | None) -> None:
        """Open the modal, prefilled with the proposed call, for a request the clicker may
        answer now; otherwise acknowledge and refuse, applying nothing."""
        found = await self._editable(click, ack)
        if isinstance(found, Exception):
            await self.refuse(click, found, ack)
            return
        assert ack is not None  # `_editable` offers no modal without one
        await ack()
        record, tool = found
        fields = fields_of(tool.input_schema, tool.editable)
        prompt = await self.prompt(click, "Approve this request?")
        view = edit_modal(prompt, self.sealed(click), fields, record.arguments)
        if not await self.open_view(click, view):
            # Too late for the trigger: nothing is approved; they are told, the buttons stay.
            await self.answers.tell(click, NOT_OPENED)

    async def submit(self, body: dict[str, Any], ack: Ack) -> None:
        """The modal's submission: approve, with what the person changed, from the person who
        clicked; an input that cannot be read is shown on its field (the modal stays open)."""
        opened = self.answers.opened_by(body)
        if opened is None:
            await ack()
            return
        ref = opened.ref
        record = await self.answers.runtime.store.get_confirmation(ref.session, ref.ident)
        tool = self.answers.agent.tool_named(record.tool) if record is not None else None
        fields = fields_of(tool.input_schema, tool.editable) if tool is not None else []
        proposed = record.arguments if record is not None else {}
        edits, errors = edits_of(body["view"], fields, proposed)
        if errors:
            await ack(response_action="errors", errors=errors)
            return
        click = _editing(opened, tool, fields, proposed, edits)
        await self.answers.answer(click, ack)

    async def _editable(
        self, click: Click, ack: Ack | None
    ) -> tuple[ConfirmationRecord, Tool] | Exception:
        """The proposal and its tool, where the modal may open; else why nothing happens."""
        found = await self.proposal(click, ack, refused=NOT_EDITABLE, no_modal=NO_MODAL)
        if isinstance(found, Exception):
            return found
        record, tool = found
        if not tool.editable or record.details is not None:
            return ResumeValidationError(NOT_EDITABLE)
        return found


def _editing(
    opened: Opened,
    tool: Tool | None,
    fields: list[EditField],
    proposed: dict[str, Any],
    edits: dict[str, Any],
) -> Click:
    """The approval the submission makes: with its edits (None: nothing changed, a plain
    approval) and what they change as the tool reads them (the message's words). A proposal
    whose tool is gone or allows no edits any more is sent with empty edits, which the engine
    refuses (never approved as proposed: the person asked for an edit)."""
    blocks = {field.name: field.block_id for field in fields}
    if tool is None or not tool.editable:
        return Click.editing(opened, {}, None, blocks)
    if not edits:
        return Click.editing(opened, None, None, blocks)
    changes = approved_changes(tool, proposed, edits)
    return Click.editing(opened, edits, changes_text(changes or {}), blocks)
