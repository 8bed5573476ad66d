"""Render one session's durable event log into its Slack thread.

The log decides what is shown; live `message.delta` events only let text appear early, and
live `progress.updated` events show the model's progress (`bot.slack.rendering.progress`). Each
batch of durable events is applied to Slack and then saved (cursor + bodies of the messages it
touched) in one transaction, so after a crash the renderer puts every open message back to its
saved body and re-applies the events after the cursor: nothing committed is lost and nothing is
shown twice.

A live delta that arrives before a durable event in the same batch is stale (the event that follows
it, a completed message or the turn's end, covers or voids it) and is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, assert_never

from slack_sdk.web.async_client import AsyncWebClient

from agent import (
    ActionCompleted,
    CancelReason,
    ConfirmationRequest,
    Tally,
    TurnEvent,
    TurnStatus,
    confirmation_digest,
    request_tally,
)
from agent.seams import SessionStore, TurnKind, parked_requests
from bot.slack.approval_blocks import ApprovalRef, confirmation_prompt, resolution, stopped_verdict
from bot.slack.edit_modal import changes_text, event_changes
from bot.slack.feedback import feedback_blocks
from bot.slack.rendering.approval_posts import ApprovalPosts, button_kind
from bot.slack.rendering.lease import DeliveryLease, RenderSettings
from bot.slack.rendering.outcomes import (
    WAITING,
    automatic_verdict,
    completed,
    confirmation_verdict,
    ended,
    is_pending_write,
    park_verdict,
    summary,
)
from bot.slack.rendering.parts import PartContent, ReplyPart, Target
from bot.slack.rendering.progress import settle_progress, show_progress
from bot.slack.rendering.recovery import recover
from bot.slack.rendering.replies import ReplyWriter, TurnView
from bot.slack.rendering.status import ThreadStatus, session_title
from bot.slack.rendering.thread import SlackThread
from bot.slack.rendering.waiting import WaitingTasks, confirm_waits, input_waits
from bot.slack.stop_reasons import stopper
from storage.delivery.store import DeliveryStore, Post

if TYPE_CHECKING:
    from bot.slack.home import HomeTab

log = logging.getLogger(__name__)

FOOTERS: dict[str, str] = {
    CancelReason.REPLACED: "_superseded by a newer message_",
    CancelReason.RESET: "_stopped: this conversation was reset_",
    CancelReason.STOPPED: "_stopped_",
}
FAILED = ":warning: Sorry, something went wrong and I could not finish this reply."


class SessionRenderer:
    """One session's renderer: reads the durable log after its cursor and shows it in Slack.

    The parts each do one job: `lease` keeps the delivery lease that fences every Slack call,
    `slack` makes those calls for the thread, `status` the thread's status line, `replies` the
    reply messages, `approvals` the approval requests; `recover` settles what a dead renderer
    left. This class decides, event by event, what each of them is asked to do."""

    def __init__(
        self,
        *,
        key: str,
        target: Target,
        client: AsyncWebClient,
        store: SessionStore,
        delivery: DeliveryStore,
        queue: asyncio.Queue[tuple[TurnEvent, int | None]],
        settings: RenderSettings,
        owner: str,
        cursor: int = 0,
        clock: Callable[[], float] = time.time,
        leased_at: float | None = None,
        home: HomeTab | None = None,
        usable: Callable[[], bool] = lambda: True,
    ) -> None:
        """`leased_at`: when (`time.monotonic()`, taken before the write) the caller acquired
        the session's delivery lease for this renderer; from then on every Slack call is made
        under the lease. None: the caller holds no lease (a one-off notice). `usable`: whether
        `client`'s token is still good (`SlackClients.usable`), asked before every call."""
        self.key = key
        self.target = target
        self.store = store
        self.delivery = delivery
        self.queue = queue
        self.settings = settings
        self.cursor = cursor
        self.lease = DeliveryLease(
            delivery, key=key, owner=owner, ttl=settings.lease_ttl, leased_at=leased_at
        )
        self.slack = SlackThread(
            key=key,
            target=target,
            client=client,
            delivery=delivery,
            lease=self.lease,
            usable=usable,
        )
        self.status = ThreadStatus(self.slack, target)
        self.replies = ReplyWriter(
            key=key,
            target=target,
            client=client,
            delivery=delivery,
            slack=self.slack,
            settings=settings,
            clock=clock,
        )
        self.approvals = ApprovalPosts(
            key=key, target=target, delivery=delivery, slack=self.slack, clock=clock, home=home
        )
        self.waiting = WaitingTasks(
            key=key, store=store, delivery=delivery, slack=self.slack, replies=self.replies
        )
        self.home = home

    # main loop ------------------------------------------------------------------------------

    async def run(self, activity: int) -> None:
        """Render until the session is caught up with no turn left to run, then go idle."""
        await self.recover()
        while True:
            # The turns are read before the events: a turn that ends in between has committed its
            # last events with its end, so this catch-up still delivers them. The other way round,
            # a turn run whole between the two reads left the session idle, its reply unshown.
            done = self.queue.empty() and await self._finished()
            await self.catch_up()
            if done and self.queue.empty() and not self.replies.part_open:
                if await self.delivery.go_idle(self.key, activity):
                    return
                target = await self.delivery.get_target(self.key)
                activity = target.activity if target else activity
            for event, horizon in await self._next_batch():
                if event.seq > 0:
                    if event.seq > self.cursor:
                        await self.catch_up()
                    continue
                # A delta is fresh only if no durable event emitted after it has been applied.
                if horizon is None:
                    continue
                if horizon > self.cursor:
                    await self.catch_up()
                if horizon < self.cursor:
                    continue
                await self.on_delta(event)
            await self.replies.flush_if_due()
            await self.lease.renew()

    async def _next_batch(self) -> list[tuple[TurnEvent, int | None]]:
        dirty = self.replies.dirty
        timeout = self.settings.flush_interval if dirty else self.settings.poll_interval
        batch: list[tuple[TurnEvent, int | None]] = []
        # `asyncio.timeout`, not `wait_for`: on Python 3.11 a `wait_for` whose inner get()
        # completes in the same loop iteration as a cancellation returns the item and swallows
        # the cancellation, and the pool's shutdown then waited on a renderer that went on.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                batch.append(await self.queue.get())
        while not self.queue.empty():
            batch.append(self.queue.get_nowait())
        return batch

    async def _finished(self) -> bool:
        if self.replies.part_open:
            return False
        turns = await self.store.list_turns(self.key)
        return not any(t.status in (TurnStatus.QUEUED, TurnStatus.RUNNING) for t in turns)

    async def recover(self) -> None:
        """Settle what a previous renderer left half done, before reading any event
        (`bot.slack.rendering.recovery`)."""
        await recover(
            key=self.key,
            delivery=self.delivery,
            slack=self.slack,
            replies=self.replies,
            approvals=self.approvals,
        )

    async def send_post(self, post: Post) -> str:
        """Post a whole message once (a notice): see `SlackThread.send_post`."""
        return await self.slack.send_post(post)

    # durable events ----------------------------------------------------------------------------

    async def catch_up(self) -> None:
        while True:
            events = await self.store.read_events(self.key, self.cursor, 200)
            if not events:
                return
            for event in events:
                await self.apply(event)
                self.cursor = event.seq
            await self.replies.flush_current()
            await self.delivery.save(
                self.key, self.cursor, self.replies.take_changes(), time.time()
            )
            await self.approvals.show_answered_ones()

    async def apply(self, event: TurnEvent) -> None:
        match event.type:
            case "turn.started":
                view = await self.replies.view_for(event.turn_id)
                await self._show_status(view, await self._title(event.turn_id, event.text))
            case "message.completed":
                view = await self.replies.view_for(event.turn_id)
                await self.status.processing()
                if view.part is not None:
                    settle_progress(view.part, event.index)
                if event.text:
                    self._complete_step(await self.replies.part(view), view, event.text)
                view.step_live = ""
            case "action.requested":
                view = await self.replies.view_for(event.turn_id)
                view.running[event.call.id] = _title(event.call.name)
                await self.status.processing(tool=_title(event.call.name))
                part = await self.replies.part(view)
                part.task(event.call.id, _title(event.call.name), "in_progress")
            case "action.completed":
                view = await self.replies.view_for(event.turn_id)
                view.running.pop(event.call_id, None)
                await self.status.processing(tool=_still_running(view))
                await self._completed(await self.replies.part(view), event)
            case "input.requested":
                view = await self.replies.view_for(event.turn_id)
                request = event.request
                view.running.pop(request.call_id, None)
                if view.part is not None and request.call_id:
                    title = _title(request.tool)
                    view.part.task(
                        request.call_id, title, "pending", WAITING, waits=input_waits(request.id)
                    )
                if await self._last_asked(request.turn_id, request.id):
                    await self.replies.close(view, None)  # its siblings' cards are marked too
                ref = ApprovalRef(
                    kind="input",
                    session=self.key,
                    turn_id=event.turn_id,
                    ident=request.id,
                    digest=request.digest,
                )
                await self.approvals.post(ref, request.prompt, request.answerers)
                await self.status.suspended()
            case "confirmation.requested":
                view = await self.replies.view_for(event.turn_id)
                self._waits_for_confirmation(view, event.confirmation)
                await self.replies.close(view, None)
                confirmation = event.confirmation
                ref = ApprovalRef(
                    kind="confirm",
                    session=self.key,
                    turn_id=event.turn_id,
                    ident=confirmation.id,
                    digest=confirmation_digest(confirmation),
                )
                await self.approvals.post(
                    ref,
                    confirmation_prompt(confirmation),
                    confirmation.answerers,
                    confirmation.grantable_for,
                    confirmation.editable,
                )
                await self.status.suspended()
            case "input.resolved":
                # However the park ended (a click, an expiry, a Stop, an answer from elsewhere),
                # its request stops offering buttons; a click has said so already.
                verdict = resolution(event.outcome, event.by, event.reason, event.approved_by)
                await self.approvals.resolved("input", event.input_id, verdict)
                answer = None
                if event.outcome == "answered":
                    answer = await self.waiting.answer_of(event.turn_id, event.input_id)
                ending = park_verdict(
                    event.outcome, event.by, event.reason, answer, event.approved_by
                )
                await self.waiting.resolved(event.turn_id, input_waits(event.input_id), ending)
            case "confirmation.resolved":
                # (Its turn is the follow-up the answer queued, not the proposing turn.)
                changed = changes_text(event_changes(event.changes))
                verdict = resolution(
                    event.outcome, event.by, event.reason, event.approved_by, changed
                )
                await self.approvals.resolved("confirm", event.confirmation_id, verdict)
                record = await self.store.get_confirmation(self.key, event.confirmation_id)
                if record is not None:
                    ending = confirmation_verdict(
                        event.outcome, event.by, event.reason, event.approved_by, changed
                    )
                    waits = confirm_waits(event.confirmation_id)
                    await self.waiting.resolved(record.turn_id, waits, ending)
            case "turn.completed":
                view = await self.replies.view_for(event.turn_id)
                # A model that ends with no words after its tools still gets a last line: what
                # the calls came to (or that it had nothing to add), never silence.
                said = None if event.text.strip() else summary(await self._tasks_of(view))
                if event.declined:  # a refusal: what was shown is cut off, and the user is told
                    said = f"_{event.declined}_"
                await self._end(view, said, feedback=True)
            case "turn.failed":
                view = await self.replies.view_for(event.turn_id)
                # The error text was scrubbed of secrets when the engine stored it; operators
                # need it (e.g. "raise ANTHROPIC_MAX_TOKENS"); the thread gets the plain apology.
                log.warning(
                    "turn failed",
                    extra={"session": self.key, "turn": event.turn_id, "error": event.error},
                )
                if view.part is not None:
                    view.part.end_unfinished_tasks("the turn failed")
                await self._end(view, FAILED)
            case "turn.cancelled":
                view = await self.replies.view_for(event.turn_id)
                by = event.by
                footer = FOOTERS.get(event.reason, f"_cancelled ({event.reason})_")
                if event.reason == CancelReason.STOPPED and by:
                    footer = f"_stopped by {stopper(by)}_"
                if view.part is not None:  # calls of the batch that never ran
                    view.part.end_unfinished_tasks(ended(event.reason, by))
                await self._end(view, footer if view.shown_any else None)
                if event.reason == CancelReason.STOPPED:
                    # Stop ends a park too: its request loses its buttons and says who stopped.
                    await self.approvals.settle(event.turn_id, stopped_verdict(by))
            case "approval.voted":
                # A vote on a request that needs several: its message shows the progress and
                # keeps its buttons for those who may still vote.
                tally = await self._tally(event.kind, event.turn_id, event.request_id)
                if tally is not None and not tally.decided:
                    await self.approvals.progress(button_kind(event.kind), event.request_id, tally)
            case "approval.reminded":  # a note mentioning whoever may still answer
                tally = await self._tally(event.kind, event.turn_id, event.request_id)
                await self.approvals.remind(event, tally)
            case "approval.escalated":  # the request and its buttons, for its new answerers
                await self.approvals.escalate(event)
            case "approval.automatic":
                # No person was asked: the call's card says which rule approved it, and keeps
                # saying so once the call returns (`completed` keeps a verdict's words).
                view = await self.replies.view_for(event.turn_id)
                approved = automatic_verdict(event.policy, event.granted_by)
                self.waiting.remember(event.turn_id, event.call_id, approved)
                part = await self.replies.part(view)
                title = _title(event.tool)
                part.task(event.call_id, title, "in_progress", approved[1], verdict=list(approved))
            case "message.delta" | "progress.updated":
                pass
            case _:
                assert_never(event.type)

    async def _tally(self, kind: str, turn_id: str, request_id: str) -> Tally | None:
        return await request_tally(self.store, self.key, button_kind(kind), turn_id, request_id)

    # live events ---------------------------------------------------------------------------

    async def on_delta(self, event: TurnEvent) -> None:
        if event.type not in ("message.delta", "progress.updated"):
            return
        view = self.replies.view
        if view is None or view.turn_id != event.turn_id:
            view = await self.replies.view_for(event.turn_id)
        if not view.live_open:
            return
        if event.type == "progress.updated":
            show_progress(await self.replies.part(view), event.index, event.text)
            return
        if event.restart:
            if view.part is not None:
                view.part.drop_pending_live(view.step_live)
            view.step_live = ""
            return
        if not event.text:
            return
        part = await self.replies.part(view)
        if not view.step_live:
            part.separate()
        part.add_text(event.text)
        view.step_live += event.text

    async def _completed(self, part: ReplyPart, event: ActionCompleted) -> None:
        """A call's card once it returned: waiting, if it proposed a write a person must
        confirm first; else how it really ended (`bot.slack.rendering.outcomes.completed`)."""
        title = _title(event.name)
        if event.error is None and is_pending_write(event.result):
            part.task(event.call_id, title, "pending", WAITING)
            return
        verdict = await self.waiting.verdict(event.turn_id, event.call_id)
        status, output = completed(error=event.error, verdict=verdict, cut=event.cancel_requested)
        cut = event.cancel_requested and output == "stopped"
        part.task(event.call_id, title, status, output, cut=cut or None, waits=None)

    def _waits_for_confirmation(self, view: TurnView, confirmation: ConfirmationRequest) -> None:
        """The proposed call's card waits for the person who confirms it."""
        if view.part is not None and confirmation.call_id:
            waits = confirm_waits(confirmation.id)
            title = _title(confirmation.tool)
            view.part.task(confirmation.call_id, title, "pending", WAITING, waits=waits)

    async def _tasks_of(self, view: TurnView) -> list[dict[str, Any]]:
        """Every card the turn's messages show, in order, the open message's last."""
        current = view.part
        tasks: list[dict[str, Any]] = []
        for post in await self.delivery.posts(self.key, turn_id=view.turn_id, kind="reply"):
            if current is None or post.post_key != current.post_key:
                tasks.extend(PartContent.from_body(self.replies.saved_body(post)).tasks.values())
        if current is not None:
            tasks.extend(current.content.tasks.values())
        return tasks

    def _complete_step(self, part: ReplyPart, view: TurnView, text: str) -> None:
        live = view.step_live
        if live and text.startswith(live):
            part.add_text(text[len(live) :])
        else:
            part.separate()
            part.add_text(text)
        part.mark_durable()

    async def _show_status(self, view: TurnView, title: str | None) -> None:
        """Progress the Slack way: the session and the status line where allowed, else a first
        task in the reply's timeline."""
        if await self.status.processing(title=title):
            return
        part = await self.replies.part(view)
        if not part.content.tasks:
            part.task("status", "Working on it", "in_progress")

    async def _last_asked(self, turn_id: str, request_id: str) -> bool:
        """Whether the turn's reply message may close on this request: it is the last of the
        requests its park waits on (the calls of one batch that asked park together, one
        `input.requested` each, and every one of their cards waits in that message), or no
        longer waits (answered since: nothing follows it that the message must show)."""
        record = await self.store.get_session(self.key)
        waiting = [
            r.id
            for r in parked_requests(record.pending if record else None)
            if r.turn_id == turn_id
        ]
        return request_id not in waiting or waiting[-1] == request_id

    async def _title(self, turn_id: str, text: str) -> str | None:
        """The thread's title, from its first message: given only with the session's first
        turn (Slack takes a session's title when it creates it, and ignores it after)."""
        turns = [t for t in await self.store.list_turns(self.key) if t.kind == TurnKind.TURN]
        return session_title(text) if turns and turns[0].turn_id == turn_id else None

    async def _end(self, view: TurnView, footer: str | None, *, feedback: bool = False) -> None:
        """The reply's last words: closed with its footer (and, for an answer, the feedback
        buttons); the session leaves `processing`, in the same call where the reply ends in a
        stream."""
        if view.part is None and footer:
            await self.replies.part(view)
        if view.part is not None:
            settle_progress(view.part)
        blocks = feedback_blocks(self.key, view.turn_id) if feedback else None
        said = await self.replies.close(
            view, footer, blocks=blocks, session_status=self.status.stream_closing_status()
        )
        view.live_open = False
        await self.status.ended(said_by_stream=said)
        await self._refresh_speakers_home(view.turn_id)

    async def _refresh_speakers_home(self, turn_id: str) -> None:
        """The speaker's Home tab lists the turn among their recent ones, with the status it had
        when the tab was last published (a Home click publishes it `queued`): shown ended now,
        not only when they next open the tab. Only a person with a Home tab is published to."""
        if self.home is None:
            return
        record = await self.store.get_turn(self.key, turn_id)
        speaker = record.input.speaker_key if record is not None else None
        if speaker:
            team, _, user = speaker.partition(":")
            self.home.refresh(team, {user})


def _still_running(view: TurnView) -> str | None:
    """The title of the latest call of the batch that is still running, if any."""
    return next(reversed(view.running.values()), None)


def _title(name: str) -> str:
    return name.replace("_", " ").capitalize()
