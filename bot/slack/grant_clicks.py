"""An "Approve & allow again" click: the modal for someone who may answer, the usual refusal for
anyone else, and the modal's submission answered as an Approve click is
(`bot.slack.approval_clicks.AnswerHandler.answer`), with the standing grant chosen.

The click itself never answers: its modal is where the person says where and how long, and an
approval without the grant they asked for would not be what they clicked. So where the modal
cannot be offered (the request is not one they may answer now, the bot has no key to seal the
modal with, the trigger is spent), nothing is applied and the clicker alone is told why, in the
words an Approve click would have got: the engine's own checks (the request still pending and
the one shown, the workspace) where they refuse, and otherwise who may answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent import (
    Agent,
    AgentSession,
    QuorumAnswerer,
    ResumeAuthorizationError,
    ResumeError,
    ResumeValidationError,
    Runtime,
    SessionSuspendedError,
    Tally,
    grant_confirmation,
)
from bot.slack.approval_blocks import who_may_answer
from bot.slack.calls import SlackCallError, call
from bot.slack.clicks import Click, names
from bot.slack.clients import SlackClients
from bot.slack.deny_modal import ModalSeal, Opened
from bot.slack.grant_modal import allow_again_of, grant_modal
from bot.slack.home import Inbox, ref_of
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)
Ack = Callable[..., Awaitable[Any]]

NOT_GRANTABLE = "this request cannot be allowed again ahead; use Approve"
NO_MODAL = "I can't offer that choice here; use Approve instead"
NOT_OPENED = "I couldn't open the choices in time; nothing was changed. Please click again."


class Answers(Protocol):
    """What this needs of the click path it is half of (`approval_clicks.AnswerHandler`)."""

    @property
    def runtime(self) -> Runtime: ...
    @property
    def agent(self) -> Agent: ...
    @property
    def delivery(self) -> DeliveryStore: ...
    @property
    def clients(self) -> SlackClients: ...
    @property
    def inbox(self) -> Inbox | None: ...
    @property
    def seal(self) -> ModalSeal | None: ...

    async def answer(self, click: Click, ack: Ack | None = None) -> None:
        """Apply the answer, then ack, then show the outcome."""
        ...

    async def after_ack(
        self,
        session: AgentSession,
        click: Click,
        failure: Exception | None,
        voted: Tally | None,
        ack: Ack | None,
    ) -> None:
        """Ack, then show the outcome (`failure`: why nothing was applied)."""
        ...

    def opened_by(self, body: dict[str, Any]) -> Opened | None:
        """The click a modal's submission completes, if sealed here for its submitter."""
        ...

    async def tell(self, click: Click, text: str) -> None:
        """Tell only the clicker."""
        ...


class GrantOffers:
    """The "Approve & allow again" half of an `AnswerHandler`."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers

    async def offer(self, click: Click, ack: Ack | None) -> None:
        """Open the modal for a request the clicker may answer now (the engine's own query, as
        for the Deny modal); otherwise acknowledge and refuse, applying nothing."""
        found = await self._limit(click, ack)
        if not isinstance(found, float):
            session = self.answers.runtime.session(self.answers.agent, click.ref.session)
            await self.answers.after_ack(session, click, found, None, ack)
            return
        assert ack is not None  # `_limit` offers no modal without one
        await ack()
        await self._open(click, found)

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
        answers = self.answers
        if click.ref.kind != "confirm":
            return ResumeValidationError(NOT_GRANTABLE)
        if answers.seal is None or answers.inbox is None or not click.trigger_id or ack is None:
            return ResumeValidationError(NO_MODAL)
        try:
            pending = await answers.inbox.answerable(click.principal)
        except Exception as unexpected:
            log.exception("could not tell who may answer; nothing was applied")
            return unexpected
        if not any(names(click.ref, ref_of(p)) for p in pending):
            return await self._why_not(click)
        record = await answers.runtime.store.get_confirmation(click.ref.session, click.ref.ident)
        tool = answers.agent.tool_named(record.tool) if record is not None else None
        limit = tool.grantable_for if tool is not None else None
        if limit is None or record is None or isinstance(record.answerers, QuorumAnswerer):
            return ResumeValidationError(NOT_GRANTABLE)
        return float(limit)

    async def _why_not(self, click: Click) -> Exception:
        """What an Approve click by this person would have been refused with: the engine's
        checks that write nothing (pending, the request shown, the workspace), else that the
        request is not theirs to answer."""
        answers, ref = self.answers, click.ref
        session = answers.runtime.session(answers.agent, ref.session)
        try:
            await grant_confirmation(
                session,
                ref.ident,
                by=click.user,
                principal=click.principal,
                turn_id=ref.turn_id,
                digest=ref.digest,
            )
        except (ResumeError, SessionSuspendedError) as refused:
            return refused
        except Exception as unexpected:
            log.exception("could not check an answer; nothing was applied")
            return unexpected
        record = await answers.runtime.store.get_confirmation(ref.session, ref.ident)
        who = who_may_answer(record.answerers if record is not None else None).rstrip(".")
        return ResumeAuthorizationError(who[:1].lower() + who[1:])

    async def _open(self, click: Click, limit: float) -> None:
        answers = self.answers
        assert answers.seal is not None
        assert click.trigger_id is not None
        opened = Opened(
            ref=click.ref,
            principal=click.principal,
            channel=click.channel,
            message_ts=click.message_ts,
            thread_ts=click.thread_ts,
            home=click.home,
            opened_at=time.time(),
        )
        post = await answers.delivery.get_post(click.ref.post_key)
        prompt = (post.body.prompt if post else None) or "Approve this request?"
        view = grant_modal(prompt, answers.seal.seal(opened), limit)
        trigger = click.trigger_id
        try:
            client = await answers.clients.for_team(click.speaks_for)
            await call("views.open", lambda: client.views_open(trigger_id=trigger, view=view))
        except SlackCallError as err:
            # Too late for the trigger: nothing is approved (the person asked for more than an
            # approval); they are told, and the buttons stay.
            log.warning("could not open the allow-again modal", extra={"code": err.code})
            await answers.tell(click, NOT_OPENED)
