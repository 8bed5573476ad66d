"""Approval requests as Slack messages: posted once per request, its votes shown as they come
(a request that needs several approvals), and shown as answered.

A request is posted with Approve / Deny buttons at most once, however often its event is
applied (a restart re-applies the log after the saved cursor): the post's row decides, and a
post begun by a renderer that died before Slack's answer is looked for before it is sent again.
An answer is shown by the click's process; if that process died first, the renderer shows it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Literal, assert_never

from agent import (
    Answerer,
    ApprovalEscalated,
    ApprovalReminded,
    PolicyAnswerer,
    QuorumAnswerer,
    Tally,
    UserAnswerer,
)
from bot.slack.approval_blocks import (
    ApprovalRef,
    answered_message,
    approval_blocks,
    progress_text,
    with_progress,
)
from bot.slack.calls import Refused, Uncertain
from bot.slack.follow_up_text import escalated_blocks, escalation_text, reminder_text
from bot.slack.rendering.parts import Target
from bot.slack.rendering.thread import SlackThread
from storage.delivery.bodies import PostBody
from storage.delivery.store import DeliveryStore, Post, PostUpdate

if TYPE_CHECKING:
    from bot.slack.home import HomeTab


def button_kind(kind: str) -> Literal["input", "confirm"]:
    """An event's request kind (`input`, `confirmation`) as a button names it."""
    return "input" if kind == "input" else "confirm"


def audience(answerers: Answerer | None, speaker: str | None) -> list[str] | None:
    """Whose Home inbox lists a request: its user answerer (the speaker by default); None for a
    policy, which only `authorize_answer` decides (everyone's with a Home tab is refreshed)."""
    match answerers:
        case None:
            return [speaker] if speaker else None
        case UserAnswerer(user=user):
            return [user]
        case QuorumAnswerer(users=users):
            return list(users) if users is not None else None
        case PolicyAnswerer():
            return None
        case _:
            assert_never(answerers)


class ApprovalPosts:
    def __init__(
        self,
        *,
        key: str,
        target: Target,
        delivery: DeliveryStore,
        slack: SlackThread,
        clock: Callable[[], float],
        home: HomeTab | None = None,
    ) -> None:
        """`home`: the Home tabs to refresh when a request appears or goes."""
        self.key = key
        self.target = target
        self.delivery = delivery
        self.slack = slack
        self.clock = clock
        self.home = home

    async def post(
        self,
        ref: ApprovalRef,
        prompt: str,
        answerers: Answerer | None,
        grantable_for: float | None = None,
        editable: Sequence[str] | None = None,
    ) -> None:
        """`grantable_for`: the tool allows standing grants (its buttons offer "Approve & allow
        again"); `editable`: the arguments its approver may change (they offer "Edit &
        approve")."""
        existing = await self.delivery.get_post(ref.post_key)
        if existing is not None and (existing.ts or existing.state != "posting"):
            return  # posted, or settled by whoever answered it: never a second request
        if existing is not None:
            # Begun by a renderer that died before Slack's answer: Slack may have it.
            found = await self.slack.find_posted(existing.post_key, since=existing.opened_at)
            if found is not None:
                await self.delivery.update_post(
                    PostUpdate(post_key=existing.post_key, ts=found, state="closed"), time.time()
                )
                return
        blocks = approval_blocks(ref, prompt, answerers, grantable_for, editable)
        post = Post(
            post_key=ref.post_key,
            session_key=self.key,
            turn_id=ref.turn_id,
            kind="approval",
            channel=self.target.channel,
            thread_ts=self.target.thread_ts,
            body=PostBody(
                prompt=prompt, blocks=blocks, audience=audience(answerers, self.target.user_id)
            ),
            opened_at=self.clock(),
        )
        await self.delivery.begin_post(post, time.time())
        await self.slack.send_post(post)
        self._refresh_home(post)

    async def show_answered_ones(self) -> None:
        """Approvals answered while the click's process died before showing it. Recovery finds
        them when a renderer starts; a renderer still running when the answer committed (its
        wake absorbed) finds them here, once the answered turn's next events arrive."""
        for post in await self.delivery.posts(self.key, kind="approval", states=("answered",)):
            await self.show_answered(post)

    async def resolved(self, kind: str, ident: str, verdict: str) -> None:
        """The request ended (answered, expired, stopped): unless a click showed it already,
        each of its messages (the request, and its escalation's re-post) says how and loses its
        buttons."""
        for post in await self._messages_of(kind, ident):
            if post.state == "answered":
                continue  # answered by a click whose mark shows it
            if post.body.answered or post.body.settled:
                continue
            await self.show_answered(_settled(post, verdict))

    async def remind(self, event: ApprovalReminded, tally: Tally | None) -> None:
        """A reminder fired: a note in the thread that mentions whoever may still answer,
        posted once; none for a request never posted here or already shown as ended."""
        request = await self._open_request(button_kind(event.kind), event.request_id)
        if request is None:
            return
        text = reminder_text(event.answerers, event.waited, request.body.prompt, tally)
        body = PostBody(prompt=text, blocks=None, audience=request.body.audience)
        await self._post_once(f"{request.post_key}|reminded", request.turn_id, "notice", body)

    async def escalate(self, event: ApprovalEscalated) -> None:
        """An escalation fired: the request is posted again, with its own buttons, to its new
        answerers (mentioned, and listed in their Home inbox), once."""
        kind, ident = button_kind(event.kind), event.request_id
        request = await self._open_request(kind, ident)
        if request is None or not request.body.blocks:
            return
        line = escalation_text(event.answerers, event.waited)
        body = PostBody(
            prompt=request.body.prompt,
            blocks=escalated_blocks(request.body.blocks, line),
            audience=audience(event.answerers, None),
        )
        # Keyed as `ApprovalRef.escalated_post_key`: it ends with the request's own suffix, so
        # the request's end settles this message too, and a late click on it is recognised.
        key = request.post_key.removesuffix(f"|{kind}|{ident}") + f"|escalated|{kind}|{ident}"
        await self._post_once(key, request.turn_id, "approval", body)

    async def _open_request(self, kind: str, ident: str) -> Post | None:
        """The request's own message, while it still shows its buttons."""
        own = [p for p in await self._messages_of(kind, ident) if "|escalated|" not in p.post_key]
        request = own[-1] if own else None
        if request is None or request.state == "answered":
            return None
        if request.body.answered or request.body.settled:
            return None
        return request

    async def _post_once(self, post_key: str, turn_id: str, kind: str, body: PostBody) -> None:
        """Post a message at most once, as `post` does for a request."""
        existing = await self.delivery.get_post(post_key)
        if existing is not None and (existing.ts or existing.state != "posting"):
            return
        if existing is not None:
            found = await self.slack.find_posted(existing.post_key, since=existing.opened_at)
            if found is not None:
                await self.delivery.update_post(
                    PostUpdate(post_key=existing.post_key, ts=found, state="closed"), time.time()
                )
                return
        post = Post(
            post_key=post_key,
            session_key=self.key,
            turn_id=turn_id,
            kind=kind,
            channel=self.target.channel,
            thread_ts=self.target.thread_ts,
            body=body,
            opened_at=self.clock(),
        )
        await self.delivery.begin_post(post, time.time())
        await self.slack.send_post(post)
        if kind == "approval":
            self._refresh_home(post)

    async def _messages_of(self, kind: str, ident: str) -> list[Post]:
        """The request's messages in the order posted: its own, then an escalation's."""
        suffix = f"|{kind}|{ident}"
        posts = await self.delivery.posts(self.key, kind="approval")
        return [p for p in posts if p.post_key.endswith(suffix)]

    async def progress(self, kind: str, ident: str, tally: Tally) -> None:
        """A vote on a request that needs several: each of its messages shows who voted so far
        and keeps its buttons (kept in the post's blocks, so a re-post shows it too)."""
        for post in await self._messages_of(kind, ident):
            await self._progress(post, tally)

    async def _progress(self, post: Post, tally: Tally) -> None:
        if post.body.answered or post.body.settled or not post.body.blocks:
            return
        body = replace(post.body, blocks=with_progress(post.body.blocks, tally))
        await self.delivery.update_post(PostUpdate(post_key=post.post_key, body=body), time.time())
        if post.ts is not None:
            ts = post.ts
            text = f"{post.body.prompt or 'Approval request'}\n{progress_text(tally)}"
            with contextlib.suppress(Refused, Uncertain):
                await self.slack.patient(
                    "chat.update",
                    lambda: self.slack.client.chat_update(
                        channel=post.channel, ts=ts, text=text, blocks=body.blocks
                    ),
                )
        self._refresh_home(post)

    async def settle(self, turn_id: str, verdict: str) -> None:
        """The turn's requests ended without an answer (stopped, expired): each says so and
        loses its buttons. One already answered keeps its answer."""
        for post in await self.delivery.posts(self.key, turn_id=turn_id, kind="approval"):
            if post.body.answered or post.body.settled:
                continue
            await self.show_answered(_settled(post, verdict))

    async def show_answered(self, post: Post) -> None:
        """The message says who answered and loses its buttons."""
        if post.ts is not None:
            ts = post.ts
            text, blocks = answered_message(post.body)
            with contextlib.suppress(Refused, Uncertain):
                await self.slack.patient(
                    "chat.update",
                    lambda: self.slack.client.chat_update(
                        channel=post.channel, ts=ts, text=text, blocks=blocks
                    ),
                )
        await self.delivery.update_post(
            PostUpdate(post_key=post.post_key, state="closed", body=post.body), time.time()
        )
        self._refresh_home(post)

    def _refresh_home(self, post: Post) -> None:
        if self.home is not None:
            listed = post.body.audience
            self.home.refresh(self.target.team, set(listed) if listed is not None else None)


def _settled(post: Post, verdict: str) -> Post:
    """The post as its message is to show it: ended without an answer, as `verdict` says."""
    return replace(post, body=replace(post.body, settled=verdict))
