"""An "Approve & allow again" click: the modal for someone who may answer, the usual refusal for
anyone else, and the modal's submission answered as an Approve click is
(`bot.slack.approval_clicks.AnswerHandler.answer`), with the standing grant chosen.

The click itself never answers: its modal is where the person says where and how long, and an
approval without the grant they asked for would not be what they clicked. So where the modal
cannot be offered (the request is not one they may answer now, the bot has no key to seal the
modal with, the trigger is spent), nothing is applied and the clicker alone is told why, in the
words an Approve click would have got (`bot.slack.modal_offers.ModalOffers.why_not`).
"""

from __future__ import annotations

from typing import Any

from agent import ResumeValidationError
from bot.slack.clicks import Click
from bot.slack.grant_modal import allow_again_of, grant_modal
from bot.slack.modal_offers import Ack, ModalOffers

NOT_GRANTABLE = "this request cannot be allowed again ahead; use Approve"
NO_MODAL = "I can't offer that choice here; use Approve instead"
NOT_OPENED = "I couldn't open the choices in time; nothing was changed. Please click again."


class GrantOffers(ModalOffers):
    """The "Approve & allow again" half of an `AnswerHandler`."""

    async def offer(self, click: Click, ack: Ack | None) -> None:
        """Open the modal for a request the clicker may answer now (the engine's own query, as
        for the Deny modal); otherwise acknowledge and refuse, applying nothing."""
        found = await self._limit(click, ack)
        if not isinstance(found, float):
            await self.refuse(click, found, ack)
            return
        assert ack is not None  # `_limit` offers no modal without one
        await ack()
        prompt = await self.prompt(click, "Approve this request?")
        if not await self.open_view(click, grant_modal(prompt, self.sealed(click), found)):
            # Too late for the trigger: nothing is approved (the person asked for more than an
            # approval); they are told, and the buttons stay.
            await self.answers.tell(click, NOT_OPENED)

    async def submit(self, body: dict[str, Any], ack: Ack) -> None:
        """The modal's submission: approve, with the grant chosen, from the person who clicked;
        an unreadable choice is shown on its field (the modal stays open)."""
        opened = self.answers.opened_by(body)
        if opened is None:
            await ack()
            return
        chosen = allow_again_of(body["view"])
        if isinstance(chosen, dict):
            await ack(response_action="errors", errors=chosen)
            return
        await self.answers.answer(Click.allowing(opened, chosen), ack)

    async def _limit(self, click: Click, ack: Ack | None) -> float | Exception:
        """The tool's `grantable_for`, where the modal may open; else why nothing happens."""
        found = await self.proposal(click, ack, refused=NOT_GRANTABLE, no_modal=NO_MODAL)
        if isinstance(found, Exception):
            return found
        _, tool = found
        if tool.grantable_for is None:
            return ResumeValidationError(NOT_GRANTABLE)
        return float(tool.grantable_for)
