"""A click on Approve or Deny: verify who may answer, apply the answer once, show who answered.

The clicker's id and workspace come from the signed payload (`body.user`), never from the
button. Every refusal leaves the engine unchanged and tells only the clicker (ephemeral): a person
not allowed to answer (someone else, or the same user id in another workspace) sees why and the
buttons stay; a button that does not match what is pending changes nothing; only a click on a
request that is really gone (answered, reset) rewrites its message. Of two racing clicks the store
lets exactly one through.

The answer and the wake-up of the session's renderer commit in one transaction, so the resumed
turn is always shown, whichever process runs it and whatever a renderer saw just before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from agent import (
    Agent,
    AgentSession,
    Principal,
    ResumeAuthorizationError,
    ResumeConflictError,
    ResumeError,
    ResumeRequest,
    Runtime,
    SessionSuspendedError,
    grant_answer,
    grant_confirmation,
)
from agent.seams import ConfirmationStatus, StoreHandle
from bot.approvals import (
    NO_LONGER_PENDING,
    ApprovalRef,
    answered_blocks,
    verdict_text,
)
from bot.slack_calls import SlackCallError, call
from storage.delivery.store import DeliveryStore, Post, PostUpdate

log = logging.getLogger(__name__)
Ack = Callable[[], Awaitable[Any]]

NOT_ALLOWED = "You can't answer this request: {why}"
STALE = (
    "This request is no longer pending (it was answered already, or the conversation was reset)."
)
MISMATCH = (
    "That button does not match the request waiting in this conversation; nothing was changed."
)
ALREADY = "This request was already answered."
TRY_AGAIN = "I couldn't record your answer just now; nothing was changed. Please try again."
BLOCKED = "I can't act on this yet: the conversation is waiting on another approval."


@dataclass(frozen=True, kw_only=True)
class Click:
    ref: ApprovalRef
    accepted: bool
    user: str
    principal: Principal
    channel: str
    message_ts: str
    thread_ts: str | None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> Click:
        action = body["actions"][0]
        container = body.get("container") or {}
        user = str(body["user"]["id"])
        # The clicker's own workspace identifies them (a user id means one person only there).
        team = body["user"].get("team_id") or (body.get("team") or {}).get("id")
        enterprise = (body.get("enterprise") or {}).get("id") or body["user"].get("enterprise_id")
        return cls(
            ref=ApprovalRef.decode(action["value"]),
            accepted=action["action_id"] == "agent_approve",
            user=user,
            principal={"team": team, "enterprise": enterprise, "user": user},
            channel=str(container.get("channel_id") or body["channel"]["id"]),
            message_ts=str(container.get("message_ts") or body["message"]["ts"]),
            thread_ts=container.get("thread_ts") or (body.get("message") or {}).get("thread_ts"),
        )


class AnswerHandler:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
        client: AsyncWebClient,
        kick: Callable[[str], None],
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.client = client
        self.kick = kick
        self._showing: set[asyncio.Task[None]] = set()

    async def handle(self, body: dict[str, Any], ack: Ack | None = None) -> None:
        """Apply the click, then `ack` it, then show the outcome in Slack.

        The answer commits before the ack, as an event's turn does: Slack never retries a click
        it saw acknowledged, so a crash between an early ack and the answer would lose it while
        the person believes they approved. Showing the outcome (Slack calls that may wait on rate
        limits) comes after the ack, which Slack wants within three seconds; if that part is
        lost, the thread's renderer shows the answer (its mark committed with it, see `_apply`).
        """
        try:
            click = Click.parse(body)
        except (KeyError, IndexError, AttributeError, ValueError, TypeError):
            log.warning("unreadable approval click ignored")
            if ack is not None:
                await ack()
            return
        session = self.runtime.session(self.agent, click.ref.session)
        failure: Exception | None = None
        try:
            await self._apply(session, click)
        except (ResumeError, SessionSuspendedError) as refused:
            failure = refused
        except Exception as unexpected:
            log.exception(
                "answering failed; nothing was applied", extra={"session": click.ref.session}
            )
            failure = unexpected
        if ack is None:
            await self._respond(session, click, failure)
            return
        await ack()
        task = asyncio.create_task(self._respond(session, click, failure))
        self._showing.add(task)
        task.add_done_callback(self._showing.discard)

    async def close(self, grace: float = 2.0) -> None:
        """Let outcomes being shown finish (briefly), so a clean stop leaves no click unanswered
        on screen."""
        if self._showing:
            await asyncio.wait(set(self._showing), timeout=grace)

    async def _respond(
        self, session: AgentSession, click: Click, failure: Exception | None
    ) -> None:
        try:
            await self._outcome(session, click, failure)
        except Exception:
            log.exception(
                "could not show an answer's outcome", extra={"session": click.ref.session}
            )

    async def _outcome(
        self, session: AgentSession, click: Click, failure: Exception | None
    ) -> None:
        match failure:
            case None:
                pass
            case ResumeAuthorizationError():
                await self._ephemeral(click, NOT_ALLOWED.format(why=failure))
                return
            case ResumeConflictError():
                await self._stale(session, click)
                return
            case ResumeError():
                await self._ephemeral(click, f"That answer was not accepted: {failure}")
                return
            case SessionSuspendedError():
                await self._ephemeral(click, BLOCKED)
                return
            case _:
                await self._ephemeral(click, TRY_AGAIN)
                return
        post = await self.delivery.get_post(click.ref.post_key)
        body_json = dict(post.body) if post else {}
        body_json["answered"] = {"by": click.user, "accepted": click.accepted}
        await self._show(click, verdict_text(click.accepted, click.user), body_json, post)
        ts = _posted_as(post, click)
        if post is not None and ts is not None:
            # Closed only with its ts: a row closed without one would make the next renderer
            # that re-applies the request post it a second time.
            await self.delivery.update_post(
                PostUpdate(post_key=post.post_key, state="closed", ts=ts), time.time()
            )

    async def _apply(self, session: AgentSession, click: Click) -> None:
        """Commit the answer with what the bot must remember of it: the thread's renderer woken
        (the resumed turn is shown, whichever process runs it) and the request's message marked
        answered (shown as such by this click, or by the renderer if this process dies first)."""
        ref = click.ref
        now = time.time()
        post = await self.delivery.get_post(ref.post_key)
        ts = _posted_as(post, click)
        answered = (
            PostUpdate(
                post_key=post.post_key,
                body={**post.body, "answered": {"by": click.user, "accepted": click.accepted}},
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
        if ref.kind == "input":
            request = ResumeRequest(
                turn_id=ref.turn_id, input_id=ref.ident, by=click.user, principal=click.principal
            )
            granted = await grant_answer(session, request)
            await session.resume(
                ref.turn_id,
                ref.ident,
                click.accepted,
                by=click.user,
                principal=click.principal,
                granted=granted,
                digest=ref.digest,
                alongside=wake,
            )
        else:
            granted = await grant_confirmation(
                session, ref.ident, by=click.user, principal=click.principal
            )
            await session.confirm(
                ref.ident,
                click.accepted,
                by=click.user,
                principal=click.principal,
                granted=granted,
                alongside=wake,
            )
        # Listening before the drain the answer queued has run: its first tokens show live.
        self.kick(ref.session)
        if wake is None:
            if answered is not None:
                await self.delivery.update_post(answered, time.time())
            await self.delivery.mark_active(ref.session, time.time())
            self.kick(ref.session)

    async def _stale(self, session: AgentSession, click: Click) -> None:
        """Not pending: say so; show the answer if we know it, else that it expired.

        Only where the button is the clicked message's own and its request is really gone: a
        value pointing elsewhere (another turn, session or request, an old digest) must not take
        the buttons off a request that still waits, or the thread is stuck until a reset."""
        ref = click.ref
        post = await self.delivery.get_post(ref.post_key)
        if not _shown_in(post, click) or not await self._gone(session, ref):
            await self._ephemeral(click, MISMATCH)
            return
        answered = (post.body.get("answered") if post else None) or await self._answer_of(
            session, ref
        )
        if answered == "racing":
            await self._ephemeral(click, ALREADY)
            return
        await self._ephemeral(click, ALREADY if answered else STALE)
        body = dict(post.body) if post else {}
        if isinstance(answered, dict):
            await self._show(
                click, verdict_text(bool(answered["accepted"]), answered.get("by")), body, post
            )
        else:
            await self._show(click, NO_LONGER_PENDING, body, post)

    async def _gone(self, session: AgentSession, ref: ApprovalRef) -> bool:
        """Is the request this button was made for no longer waiting for anyone?"""
        if ref.kind == "confirm":
            record = await self.runtime.store.get_confirmation(ref.session, ref.ident)
            return record is None or record.status != ConfirmationStatus.PENDING
        waiting = await session.pending()
        return waiting is None or waiting.turn_id != ref.turn_id or waiting.id != ref.ident

    async def _answer_of(
        self, session: AgentSession, ref: ApprovalRef
    ) -> dict[str, Any] | str | None:
        store = self.runtime.store
        if ref.kind == "confirm":
            record = await store.get_confirmation(ref.session, ref.ident)
            if record is None or record.status == ConfirmationStatus.PENDING:
                return None
            return {"by": record.by, "accepted": record.status == ConfirmationStatus.ACCEPTED}
        steps = await store.load_steps(ref.session, ref.turn_id)
        # Answered, but the winning click has not shown its verdict yet: leave that to it.
        return "racing" if f"input:{ref.turn_id}:{ref.ident}" in steps else None

    async def _show(
        self, click: Click, verdict: str, body: dict[str, Any], post: Post | None
    ) -> None:
        """Rewrite the request's own message (the one the renderer posted for it; the clicked
        one only when the bot has no record of it)."""
        prompt = str(body.get("prompt") or "Approval request")
        blocks = answered_blocks(prompt, verdict)
        channel, ts = (
            (post.channel, post.ts)
            if post is not None and post.ts
            else (click.channel, click.message_ts)
        )
        try:
            await call(
                "chat.update",
                lambda: self.client.chat_update(
                    channel=channel,
                    ts=ts,
                    text=f"{prompt}\n{verdict}",
                    blocks=blocks,
                ),
            )
        except SlackCallError as err:
            log.warning("could not update the approval message", extra={"code": err.code})

    async def _ephemeral(self, click: Click, text: str) -> None:
        try:
            await call(
                "chat.postEphemeral",
                lambda: self.client.chat_postEphemeral(
                    channel=click.channel, user=click.user, text=text, thread_ts=click.thread_ts
                ),
            )
        except SlackCallError as err:
            log.warning("could not tell the clicker", extra={"code": err.code})


def _posted_as(post: Post | None, click: Click) -> str | None:
    """The ts of the request's message: the recorded one, or, where the renderer that posted it
    died before Slack's answer reached it (the row still `posting`), the clicked message, which
    is that post (its buttons carry this request, and only its post puts them on a message)."""
    if post is None:
        return None
    if post.ts:
        return post.ts
    if post.state == "posting" and post.channel == click.channel:
        return click.message_ts
    return None


def _shown_in(post: Post | None, click: Click) -> bool:
    """The button value belongs to the clicked message: the bot posted that request there."""
    return post is not None and post.ts == click.message_ts and post.channel == click.channel


def _all_of(writes: list[Callable[[StoreHandle], None]]) -> Callable[[StoreHandle], None]:
    def write(handle: StoreHandle) -> None:
        for one in writes:
            one(handle)

    return write
