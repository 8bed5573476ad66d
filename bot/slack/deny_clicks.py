"""Deny asks why: a Deny click opens the Deny modal (`bot.slack.deny_modal`) for someone who may
answer the request now, and its submission denies through the click's own path
(`bot.slack.approval_clicks.AnswerHandler.answer`) with the reason.

Where the modal cannot help (the clicker may not answer, the request is gone, no key to seal it
with), the click is answered at once and refused as it always was; where Slack refuses to open
it (the trigger too old on a slow machine), the Deny is applied at once, without a reason: the
person asked to deny, and an unanswered click would leave them believing they had.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.slack.clicks import Click
from bot.slack.deny_modal import deny_modal, reason_of
from bot.slack.modal_offers import Ack, ModalOffers

log = logging.getLogger(__name__)


class DenyOffers(ModalOffers):
    """The Deny-with-a-reason half of an `AnswerHandler`."""

    async def offer(self, click: Click, ack: Ack | None) -> bool:
        """Open the modal (the click acknowledged) for a Deny its clicker may give; False
        (nothing done) where the Deny is to be answered at once instead."""
        if not self.can_open(click, ack) or await self.answerable(click) is not True:
            return False
        assert ack is not None
        await ack()
        view = deny_modal(await self.prompt(click, "Deny this request?"), self.sealed(click))
        if not await self.open_view(click, view):
            log.warning("denying at once, without a reason")
            await self.answers.answer(click, None)
        return True

    async def submit(self, body: dict[str, Any], ack: Ack) -> None:
        """The modal's submission: the Deny, with its reason, from the person who clicked;
        anything else (metadata not sealed here, another submitter) changes nothing."""
        opened = self.answers.opened_by(body)
        if opened is None:
            await ack()
            return
        await self.answers.answer(Click.submitted(opened, reason_of(body["view"])), ack)
