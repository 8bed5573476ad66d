"""A click on Approve or Deny (in a thread, or in the Home tab's inbox): verify who may answer,
apply the answer once, show who answered.

Deny first asks why, in a modal (`bot.slack.deny_clicks`), where the person may answer: the click
opens it (with the click's trigger, within Slack's three seconds) and its submission answers
through this same path, with the reason. Where the modal cannot help (the clicker may not
answer, the request is gone), the click is answered at once, as before, and refused the same.
"Approve & allow again" (`bot.slack.grant_clicks`) and "Edit & approve"
(`bot.slack.edit_clicks`) open their own modals the same way (`bot.slack.modal_offers`), and
their submissions approve through this path with the standing grant chosen or the arguments
changed; what the engine refuses of them (422) is shown in the modal, nothing applied.

The clicker's id and workspace come from the signed payload (`bot.slack.identity`, as Bolt reads
them: in Enterprise Grid the org is `team.enterprise_id`), never from the button, whose value
binds the answer to what was shown (session, turn, request and digest, for a park and a
proposed write alike). Every refusal leaves the engine unchanged and tells only the clicker
(ephemeral): a person not allowed to answer (someone else, or the same user id in another
workspace) sees why and the buttons stay; a button that does not match what is pending changes
nothing; only a click on a request that is really gone (answered, reset) rewrites its message.
Of two racing clicks the store lets exactly one through.

The answer and the wake-up of the session's renderer commit in one transaction, so the resumed
turn is always shown, whichever process runs it and whatever a renderer saw just before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any, Literal

from agent import (
    Agent,
    AgentSession,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeError,
    ResumeRequest,
    ResumeValidationError,
    Runtime,
    SessionSuspendedError,
    Tally,
    grant_answer,
    grant_confirmation,
)
from agent.seams import ConfirmationStatus, StoreHandle
from bot.slack.approval_blocks import (
    EDITED,
    NO_LONGER_PENDING,
    ApprovalRef,
    answered_blocks,
    mark_verdict,
    verdict_text,
    vote_counted,
)
from bot.slack.calls import SlackCallError, call
from bot.slack.clicks import Click, answer_mark, posted_as, shown_in
from bot.slack.clients import SlackClients
from bot.slack.deny_clicks import DenyOffers
from bot.slack.deny_modal import ModalSeal, Opened
from bot.slack.edit_clicks import EditOffers
from bot.slack.edit_modal import argument_changes, changes_text
from bot.slack.grant_clicks import GrantOffers
from bot.slack.home import HomeTab, Inbox
from bot.slack.identity import principal_of
from storage.delivery.bodies import AnswerMark
from storage.delivery.store import DeliveryStore, Post, PostUpdate

log = logging.getLogger(__name__)
Ack = Callable[..., Awaitable[Any]]

NOT_ALLOWED = "You can't answer this request: {why}."
STALE = (
    "This request is no longer pending (it was answered already, it expired or was stopped, or "
    "the conversation was reset)."
)
MISMATCH = (
    "That button does not match the request waiting in this conversation; nothing was changed."
)
ALREADY = "This request was already answered."
TRY_AGAIN = "I couldn't record your answer just now; nothing was changed. Please try again."
BLOCKED = "I can't act on this yet: the conversation is waiting on another approval."


class AnswerHandler:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
        clients: SlackClients,
        kick: Callable[[str], None],
        inbox: Inbox | None = None,
        home: HomeTab | None = None,
        seal: ModalSeal | None = None,
    ) -> None:
        """`inbox`: the engine's query of who may answer what (the Deny modal opens only for
        someone it lists); `home`: the Home tab to refresh and to tell a Home click's refusal
        in; `seal`: signs the modals' metadata (no modal without it)."""
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.clients = clients
        self.kick = kick
        self.inbox = inbox
        self.home = home
        self.seal = seal
        self.denials = DenyOffers(self)
        self.grants = GrantOffers(self)
        self.edits = EditOffers(self)
        self._showing: set[asyncio.Task[None]] = set()

    async def handle(self, body: dict[str, Any], ack: Ack | None = None) -> None:
        """A click on Approve or Deny; a Deny the clicker may give first asks why (a modal),
        and "Approve & allow again" and "Edit & approve" open their modals."""
        try:
            click = Click.parse(body)
        except (KeyError, IndexError, AttributeError, ValueError, TypeError):
            log.warning("unreadable approval click ignored")
            if ack is not None:
                await ack()
            return
        if click.wants_grant:
            await self.grants.offer(click, ack)
            return
        if click.wants_edit:
            await self.edits.offer(click, ack)
            return
        if not click.accepted and await self.denials.offer(click, ack):
            return
        await self.answer(click, ack)

    def opened_by(self, body: dict[str, Any]) -> Opened | None:
        """The click a modal's submission completes, if this app sealed the modal for it and
        the submitter is the person who clicked; None (logged) otherwise."""
        try:
            view = body["view"]
            opened = self.seal.open(str(view["private_metadata"])) if self.seal else None
            submitter = principal_of(body)
        except (KeyError, TypeError, AttributeError):
            opened, submitter = None, None
        if opened is None or submitter is None:
            log.warning("a modal submission that this app did not seal was ignored")
            return None
        if any(submitter.get(k) != opened.principal.get(k) for k in ("team", "enterprise", "user")):
            log.warning("a modal submitted by another person than its opener was ignored")
            return None
        return opened

    async def answer(self, click: Click, ack: Ack | None = None) -> None:
        """Apply the click, then `ack` it, then show the outcome in Slack.

        The answer commits before the ack, as an event's turn does: Slack never retries a click
        it saw acknowledged, so a crash between an early ack and the answer would lose it while
        the person believes they approved. Showing the outcome (Slack calls that may wait on rate
        limits) comes after the ack, which Slack wants within three seconds; if that part is
        lost, the thread's renderer shows the answer (its mark committed with it, see `_apply`).
        """
        session = self.runtime.session(self.agent, click.ref.session)
        failure: Exception | None = None
        voted: Tally | None = None
        try:
            voted = await self._apply(session, click)
        except (ResumeError, SessionSuspendedError) as refused:
            failure = refused
        except Exception as unexpected:
            log.exception(
                "answering failed; nothing was applied", extra={"session": click.ref.session}
            )
            failure = unexpected
        errors = click.modal_errors(failure) if isinstance(failure, ResumeValidationError) else {}
        if errors and ack is not None:
            # What the modal asked for is not allowed (a grant past the limit, an edit that
            # breaks the tool's schema; nothing was applied): said in the modal, under its
            # field, and the modal stays open for another choice.
            await ack(response_action="errors", errors=errors)
            return
        await self.after_ack(session, click, failure, voted, ack)

    async def after_ack(
        self,
        session: AgentSession,
        click: Click,
        failure: Exception | None,
        voted: Tally | None,
        ack: Ack | None,
    ) -> None:
        """`ack`, then show the outcome (`failure`: why nothing was applied) in Slack."""
        if ack is None:
            await self._respond(session, click, failure, voted)
            return
        await ack()
        task = asyncio.create_task(self._respond(session, click, failure, voted))
        self._showing.add(task)
        task.add_done_callback(self._showing.discard)

    async def close(self, grace: float = 2.0) -> None:
        """Let outcomes being shown finish (briefly), so a clean stop leaves no click unanswered
        on screen."""
        if self._showing:
            await asyncio.wait(set(self._showing), timeout=grace)

    async def _respond(
        self, session: AgentSession, click: Click, failure: Exception | None, voted: Tally | None
    ) -> None:
        try:
            await self._outcome(session, click, failure, voted)
        except Exception:
            log.exception(
                "could not show an answer's outcome", extra={"session": click.ref.session}
            )

    async def _outcome(
        self, session: AgentSession, click: Click, failure: Exception | None, voted: Tally | None
    ) -> None:
        match failure:
            case None:
                pass
            case ResumeAuthorizationError():
                await self.tell(click, NOT_ALLOWED.format(why=failure))
                return
            case ResumeConflictError():
                await self._stale(session, click)
                return
            case ResumeError():
                await self.tell(click, f"That answer was not accepted: {failure}")
                return
            case SessionSuspendedError():
                await self.tell(click, BLOCKED)
                return
            case _:
                await self.tell(click, TRY_AGAIN)
                return
        post = await self.delivery.get_post(click.ref.post_key)
        if voted is not None and not voted.decided:
            # One vote of several: the clicker is told it counted; the message (the renderer
            # shows the progress) keeps its buttons for the others.
            await self.tell(click, vote_counted(voted, click.accepted))
            self._refresh_home(click, post)
            return
        approved_by = list(voted.approved_by) if voted is not None else None
        verdict = verdict_text(
            click.accepted, click.user, approved_by, click.allowed_again, click.changes
        )
        if click.reason:
            verdict += f": {click.reason}"
        await self._show(click, verdict, post)
        self._refresh_home(click, post)
        ts = posted_as(post, click)
        if post is not None and ts is not None:
            # Closed only with its ts: a row closed without one would make the next renderer
            # that re-applies the request post it a second time.
            await self.delivery.update_post(
                PostUpdate(post_key=post.post_key, state="closed", ts=ts), time.time()
            )

    async def _apply(self, session: AgentSession, click: Click) -> Tally | None:
        """Commit the answer with what the bot must remember of it: the thread's renderer woken
        (the resumed turn is shown, whichever process runs it) and the request's message marked
        answered (shown as such by this click, or by the renderer if this process dies first).

        For a request that needs several approvals the click is a vote: the tally after it is
        returned, and until the votes decide, the message is not marked answered (the renderer,
        woken, shows the progress)."""
        ref = click.ref
        now = time.time()
        post = await self.delivery.get_post(ref.post_key)
        ts = posted_as(post, click)
        before = await session.tally(ref.kind, ref.turn_id, ref.ident)
        answered = (
            PostUpdate(
                post_key=post.post_key,
                body=replace(post.body, answered=answer_mark(click, before)),
                state="answered",
                ts=ts,
            )
            if post is not None and ts is not None
            else None
        )
        wake: Callable[[StoreHandle], None] | None = None
        if self.delivery.same_database:
            writes = [self.delivery.activation(ref.session, now)]
            if answered is not None:
                writes.append(self.delivery.post_change(answered, now))
            wake = _all_of(writes)
        voted: Tally | None
        if ref.kind == "input":
            request = ResumeRequest(
                turn_id=ref.turn_id, input_id=ref.ident, by=click.user, principal=click.principal
            )
            granted = await grant_answer(session, request)
            voted = await session.resume(
                ref.turn_id,
                ref.ident,
                click.accepted,
                by=click.user,
                principal=click.principal,
                granted=granted,
                digest=ref.digest,
                alongside=wake,
                reason=click.reason,
            )
        else:
            # Bound as a park's answer is: the button's turn, and its digest where it has one
            # (buttons posted before they carried it name the proposal by turn and id).
            granted = await grant_confirmation(
                session,
                ref.ident,
                by=click.user,
                principal=click.principal,
                turn_id=ref.turn_id,
                digest=ref.digest,
            )
            await session.confirm(
                ref.ident,
                click.accepted,
                by=click.user,
                principal=click.principal,
                granted=granted,
                alongside=wake,
                reason=click.reason,
                turn_id=ref.turn_id,
                digest=ref.digest,
                allow_again=click.allow_again,
                edits=click.edits,
            )
            voted = None
            if before is not None:
                after = await session.tally("confirm", ref.turn_id, ref.ident)
                repeat = click.user in (*before.approved_by, *before.denied_by)
                voted = replace(after or before, counted=not repeat)
        # Listening before the drain the answer queued has run: its first tokens show live.
        self.kick(ref.session)
        still_voting = voted is not None and not voted.decided
        if wake is None or still_voting:
            if answered is not None and not still_voting:
                await self.delivery.update_post(answered, time.time())
            await self.delivery.mark_active(ref.session, time.time())
            self.kick(ref.session)
        return voted

    async def _stale(self, session: AgentSession, click: Click) -> None:
        """Not pending: say so; show the answer if we know it, else that it expired.

        Only where the button is the clicked message's own and its request is really gone: a
        value pointing elsewhere (another turn, session or request, an old digest) must not take
        the buttons off a request that still waits, or the thread is stuck until a reset."""
        ref = click.ref
        post = await self.delivery.get_post(ref.post_key)
        repost = await self.delivery.get_post(ref.escalated_post_key)
        mine = shown_in(post, click) or shown_in(repost, click)  # the re-post has its buttons
        if not mine or not await self._gone(session, ref):
            await self.tell(click, MISMATCH)
            return
        if post is not None and post.body.settled:
            # Ended without an answer (expired, stopped); its message says so already.
            await self.tell(click, STALE)
            return
        answered = (post.body.answered if post else None) or await self._answer_of(session, ref)
        if answered == "racing":
            await self.tell(click, ALREADY)
            return
        await self.tell(click, ALREADY if answered else STALE)
        if isinstance(answered, AnswerMark):
            await self._show(click, mark_verdict(answered, voters=False), post)
        else:
            await self._show(click, NO_LONGER_PENDING, post)

    async def _gone(self, session: AgentSession, ref: ApprovalRef) -> bool:
        """Is the request this button was made for no longer waiting for anyone?"""
        if ref.kind == "confirm":
            record = await self.runtime.store.get_confirmation(ref.session, ref.ident)
            return record is None or record.status != ConfirmationStatus.PENDING
        waiting = await session.pending()
        return not any((w.turn_id, w.id) == (ref.turn_id, ref.ident) for w in waiting)

    async def _answer_of(
        self, session: AgentSession, ref: ApprovalRef
    ) -> AnswerMark | Literal["racing"] | None:
        store = self.runtime.store
        if ref.kind == "confirm":
            record = await store.get_confirmation(ref.session, ref.ident)
            if record is None or record.status == ConfirmationStatus.PENDING:
                return None
            edited = changes_text(argument_changes(record.arguments, record.approved_arguments))
            return AnswerMark(
                by=record.by,
                accepted=record.status == ConfirmationStatus.ACCEPTED,
                extra={EDITED: edited} if edited else {},
            )
        steps = await store.load_steps(ref.session, ref.turn_id)
        # Answered, but the winning click has not shown its verdict yet: leave that to it.
        return "racing" if f"input:{ref.turn_id}:{ref.ident}" in steps else None

    async def _show(self, click: Click, verdict: str, post: Post | None) -> None:
        """Rewrite the request's own message (the one the renderer posted for it; the clicked
        one only when the bot has no record of it)."""
        prompt = (post.body.prompt if post else None) or "Approval request"
        blocks = answered_blocks(prompt, verdict)
        channel, ts = (
            (post.channel, post.ts)
            if post is not None and post.ts
            else (click.channel, click.message_ts)
        )
        if channel is None or ts is None:
            return  # a Home click on a request the bot has no message for
        try:
            client = await self.clients.for_team(click.speaks_for)
            await call(
                "chat.update",
                lambda: client.chat_update(
                    channel=channel,
                    ts=ts,
                    text=f"{prompt}\n{verdict}",
                    blocks=blocks,
                ),
            )
        except SlackCallError as err:
            log.warning("could not update the approval message", extra={"code": err.code})

    async def tell(self, click: Click, text: str) -> None:
        """Tell only the clicker: in the thread, or for a Home click at the top of their Home
        tab (which has no channel to post in), republished with what is pending now."""
        channel = click.channel
        try:
            if channel is None:
                if self.home is not None:
                    await self.home.publish(click.principal, notice=text)
                return
            client = await self.clients.for_team(click.speaks_for)
            await call(
                "chat.postEphemeral",
                lambda: client.chat_postEphemeral(
                    channel=channel, user=click.user, text=text, thread_ts=click.thread_ts
                ),
            )
        except SlackCallError as err:
            log.warning("could not tell the clicker", extra={"code": err.code})

    def _refresh_home(self, click: Click, post: Post | None) -> None:
        """The request is gone from every inbox that listed it: the clicker's, and the others
        who could answer it (its post's audience; everyone's with a Home tab for a policy)."""
        team = click.principal.get("team")
        if self.home is None or not team:
            return
        audience = post.body.audience if post else None
        users = {click.user, *audience} if audience is not None else None
        self.home.refresh(team, users)


def _all_of(writes: list[Callable[[StoreHandle], None]]) -> Callable[[StoreHandle], None]:
    def write(handle: StoreHandle) -> None:
        for one in writes:
            one(handle)

    return write
