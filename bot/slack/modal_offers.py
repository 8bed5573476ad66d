"""A button that opens a modal before it answers (Deny with a reason, Approve & allow again,
Edit & approve): the checks that decide whether the modal may open, and opening it.

A modal opens only for a request the clicker may answer now (the engine's own query,
`inbox.answerable`), so a refusal is said at the click, not after the form is filled in; it
opens with the click's trigger (`views.open`, within Slack's three seconds) and its
`private_metadata` sealed for that person and that click (`bot.slack.deny_modal.ModalSeal`).
Where it may not open, what happens instead is each button's own (a Deny is answered at once; an
approval that asked for more than an approval is refused, with the words an Approve click would
have got: `why_not`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent import (
    Agent,
    AgentSession,
    ConfirmationRecord,
    QuorumAnswerer,
    ResumeAuthorizationError,
    ResumeError,
    ResumeValidationError,
    Runtime,
    SessionSuspendedError,
    Tally,
    Tool,
    grant_confirmation,
)
from bot.slack.approval_blocks import who_may_answer
from bot.slack.calls import SlackCallError, call
from bot.slack.clicks import Click, names
from bot.slack.clients import SlackClients
from bot.slack.deny_modal import ModalSeal, Opened
from bot.slack.home import Inbox, ref_of
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)
Ack = Callable[..., Awaitable[Any]]


class Answers(Protocol):
    """What a modal needs of the click path it is part of (`approval_clicks.AnswerHandler`)."""

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


class ModalOffers:
    """The part of an `AnswerHandler` behind one modal's button; each modal's class adds what
    it offers and what its submission answers."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers

    def can_open(self, click: Click, ack: Ack | None) -> bool:
        """A modal can open here at all: a key to seal it with, the engine's query, a trigger,
        and a click not yet acknowledged."""
        answers = self.answers
        return bool(answers.seal and answers.inbox and click.trigger_id and ack is not None)

    async def answerable(self, click: Click) -> bool | Exception:
        """Is the clicked request one the clicker may answer now? The query's failure, if it
        failed."""
        assert self.answers.inbox is not None
        try:
            pending = await self.answers.inbox.answerable(click.principal)
        except Exception as unexpected:
            log.exception("could not tell who may answer")
            return unexpected
        return any(names(click.ref, ref_of(p)) for p in pending)

    async def proposal(
        self, click: Click, ack: Ack | None, *, refused: str, no_modal: str
    ) -> tuple[ConfirmationRecord, Tool] | Exception:
        """The proposed write the click is about, and its tool, where a modal may open for it:
        one the clicker may answer now, one person's to approve (not a `Quorum`'s). Otherwise
        why nothing happens (`refused`: not such a proposal; `no_modal`: no modal here)."""
        if click.ref.kind != "confirm":
            return ResumeValidationError(refused)
        if not self.can_open(click, ack):
            return ResumeValidationError(no_modal)
        answerable = await self.answerable(click)
        if isinstance(answerable, Exception):
            return answerable
        if not answerable:
            return await self.why_not(click)
        answers = self.answers
        record = await answers.runtime.store.get_confirmation(click.ref.session, click.ref.ident)
        tool = answers.agent.tool_named(record.tool) if record is not None else None
        if record is None or tool is None or isinstance(record.answerers, QuorumAnswerer):
            return ResumeValidationError(refused)
        return record, tool

    async def why_not(self, click: Click) -> Exception:
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

    async def refuse(self, click: Click, failure: Exception, ack: Ack | None) -> None:
        """Acknowledge the click and tell the clicker why nothing happened."""
        session = self.answers.runtime.session(self.answers.agent, click.ref.session)
        await self.answers.after_ack(session, click, failure, None, ack)

    def sealed(self, click: Click) -> str:
        """The modal's `private_metadata`: this click, for this person, signed."""
        assert self.answers.seal is not None
        opened = Opened(
            ref=click.ref,
            principal=click.principal,
            channel=click.channel,
            message_ts=click.message_ts,
            thread_ts=click.thread_ts,
            home=click.home,
            opened_at=time.time(),
        )
        return self.answers.seal.seal(opened)

    async def prompt(self, click: Click, otherwise: str) -> str:
        """The request's prompt, as its message shows it."""
        post = await self.answers.delivery.get_post(click.ref.post_key)
        return (post.body.prompt if post else None) or otherwise

    async def open_view(self, click: Click, view: dict[str, Any]) -> bool:
        """`views.open` with the click's trigger; False (logged) where Slack refused it (most
        likely the trigger was too old: a slow machine)."""
        assert click.trigger_id is not None
        trigger = click.trigger_id
        try:
            client = await self.answers.clients.for_team(click.speaks_for)
            await call("views.open", lambda: client.views_open(trigger_id=trigger, view=view))
        except SlackCallError as err:
            log.warning(
                "could not open a modal", extra={"code": err.code, "modal": view["callback_id"]}
            )
            return False
        return True
