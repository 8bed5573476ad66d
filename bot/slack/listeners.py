"""Bolt listeners: each hands its work to the engine and returns.

Events run before the response (`process_before_response=True`): the listener's only work is two
short commits, the durable `session.start` and then where the replies go, so the 200 Slack gets
means "the turn is queued" and a crash before it makes Slack retry instead of losing the message.
A button click is applied (the answer committed) before its `ack()`, for the same reason; what it
shows in Slack follows the response. The reset slash command and message shortcut `ack()` at
once and reset in a lazy listener after the response (`bot.slack.resets`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import re
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from agent import Agent, Runtime, SessionSuspendedError
from bot.slack.agent_entry import AgentEntry
from bot.slack.approval_blocks import ALLOW_AGAIN, APPROVE, DENY, EDIT
from bot.slack.approval_clicks import AnswerHandler
from bot.slack.calls import SlackCallError
from bot.slack.deny_modal import DENY_REASON
from bot.slack.edit_modal import EDIT_MODAL
from bot.slack.feedback import FEEDBACK, FeedbackHandler
from bot.slack.grant_modal import ALLOW_AGAIN_MODAL
from bot.slack.home import HomeTab
from bot.slack.home_grants import REVOKE_GRANT, GrantRevokes
from bot.slack.identity import principal_of
from bot.slack.inbound import SlackMessage, person_message
from bot.slack.oauth import Uninstalls
from bot.slack.rendering.pool import RendererPool
from bot.slack.resets import RESET_SHORTCUT, Resets
from bot.slack.stops import Stops
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)

Ack = Callable[..., Awaitable[Any]]
SUSPENDED_NOTE = (
    "I'm still waiting for an answer to the approval above, so I can't start on this yet. "
    "Answer it, or reset this conversation with `{command}`."
)
TOO_LONG_NOTE = (
    "That message is too long for me: it has {length:,} characters and I read at most "
    "{limit:,}. Please shorten it or split it up."
)
HANDLED_EVENTS = (
    "app_mention",
    "message",
    "agent_session_stopped",
    "assistant_thread_started",
    "app_home_opened",
    "app_uninstalled",
    "tokens_revoked",
)
"""The Events API types a listener handles (`manifest.yml` subscribes to these and no others)."""
ACKS_IN_FLIGHT = 8
"""Events doing their database work at once in a web process that runs no turns. A pool closes
each overflow connection on return, so a burst past the pool's size paid for a new PostgreSQL
connection (and server process) on almost every ack, just when the CPU was scarcest; this stays
under the PostgreSQL pools' ten connections (`storage.sql.dialects`). Four was too few: when the
database slowed down under a worker's load, four at once capped the acks below the arrival rate
and the queue here made the p99 (200 events/s: 130-200 ms with four, 67-86 ms with eight).
Where the process also runs turns there is no bound: the turns' commits share the same
connections (on SQLite the same thread), and four acks among thirty-two turns got so small a
share that a burst's acks took ten times longer."""


class Listeners:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
        renderers: RendererPool,
        answers: AnswerHandler,
        replace_in_flight: bool,
        resets: Resets,
        entry: AgentEntry,
        stops: Stops,
        feedback: FeedbackHandler,
        reset_command: str,
        home: HomeTab | None = None,
        max_inbound_chars: int,
        acks_in_flight: int | None = ACKS_IN_FLIGHT,
        uninstalls: Uninstalls | None = None,
    ) -> None:
        """`uninstalls`: installs in many workspaces only (`bot.slack.oauth`)."""
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.renderers = renderers
        self.answers = answers
        self.replace_in_flight = replace_in_flight
        self.resets = resets
        self.entry = entry
        self.stops = stops
        self.feedback = feedback
        self.home = home
        self.revokes = (
            GrantRevokes(runtime=runtime, agent=agent, home=home) if home is not None else None
        )
        self.reset_command = reset_command
        self.max_inbound_chars = max_inbound_chars
        self.uninstalls = uninstalls
        self._in_flight = (
            asyncio.Semaphore(acks_in_flight) if acks_in_flight else contextlib.nullcontext()
        )

    def register(self, app: AsyncApp) -> None:
        mention, message, *_ = HANDLED_EVENTS
        app.event(mention)(self.on_event)
        app.event(message)(self.on_event)
        app.event("agent_session_stopped")(self.on_stop)
        entry = self.entry
        app.event("assistant_thread_started")(ack=entry.ack, lazy=[entry.on_thread_started])
        app.event("app_home_opened")(ack=entry.ack, lazy=[self.on_home_opened])
        if self.uninstalls is not None:
            gone = self.uninstalls
            app.event("app_uninstalled")(ack=gone.on_uninstalled, lazy=[gone.stop_work])
            app.event("tokens_revoked")(ack=gone.on_tokens_revoked, lazy=[gone.stop_work])
        # Anything else Slack sends gets a 200: a 404 would only make it retry.
        app.event(re.compile(".*"))(self.ignore)
        for action_id in (APPROVE, DENY, ALLOW_AGAIN, EDIT):
            app.action(action_id)(self.on_click)
        app.action(FEEDBACK)(self.on_feedback)
        app.action(REVOKE_GRANT)(self.on_revoke)
        app.action(re.compile(".*"))(self.ack)
        app.view(DENY_REASON)(self.on_deny_reason)
        app.view(ALLOW_AGAIN_MODAL)(self.on_allow_again)
        app.view(EDIT_MODAL)(self.on_edit_approve)
        resets = self.resets
        app.command(self.reset_command)(ack=resets.ack_command, lazy=[resets.on_command])
        app.message_shortcut(RESET_SHORTCUT)(ack=resets.ack_shortcut, lazy=[resets.on_shortcut])

    # events --------------------------------------------------------------------------------

    async def ignore(self) -> None:
        return None

    async def on_event(self, body: dict[str, Any], context: AsyncBoltContext) -> None:
        message = person_message(body, context.bot_user_id)
        if message is None:
            return
        async with self._in_flight:
            if not await self._starts_turn(message):
                return
            if len(message.text) > self.max_inbound_chars:
                await self.refuse_too_long(message)
            else:
                await self.dispatch(message)

    async def _starts_turn(self, message: SlackMessage) -> bool:
        if message.mentions_bot or message.is_dm:
            return True
        if message.in_thread:
            # A follow-up in a thread the bot is part of: it has a delivery target there.
            return await self.delivery.get_target(message.session_key, urgent=True) is not None
        return False

    async def dispatch(self, message: SlackMessage) -> str:
        """Queue the turn durably and say where its replies go, in one transaction where the
        delivery tables share the engine's database; the runtime runs it and the renderer
        shows it.

        Otherwise the turn first: a renderer (in this process or a worker) that finds the session
        registered must also find its turn, or it could see nothing left to do and go idle for
        good just before the turn is queued. Rendering may then start a moment after the turn
        does: a renderer that joins in the middle of a step shows that step's text at its commit
        instead of token by token, and never loses any of it.
        """
        key = message.session_key
        session = self.runtime.session(self.agent, key)
        register = self._registering(message)
        alongside = (
            self.delivery.registration(*register.args, **register.keywords)
            if self.delivery.same_database
            else None
        )
        registered, suspended = alongside is not None, False
        try:
            turn_id = str(
                await session.start(
                    message.inbound(),
                    turn_id=message.turn_id,
                    replace=self.replace_in_flight,
                    alongside=alongside,
                )
            )
        except SessionSuspendedError:
            turn_id, suspended, registered = message.turn_id, True, False
        if not registered:
            await register()
        self.renderers.kick(key)
        if suspended:
            self.renderers.notice(
                key, turn_id, "suspended", SUSPENDED_NOTE.format(command=self.reset_command)
            )
        return turn_id

    async def refuse_too_long(self, message: SlackMessage) -> None:
        """Say in the thread that the message is too long, and do nothing else: no turn, so the
        model never sees it.

        The note is posted from this process whether or not it runs turns (a `notice` needs no
        renderer), once per message however often Slack delivers it (retries and the twin
        `message` + `app_mention` events), since its key is the message's turn id. It needs the
        thread registered as the session's delivery target; the bot has then spoken there, so a
        follow-up in the thread is heard as in any thread the bot is part of.
        """
        key = message.session_key
        await self._registering(message)()
        note = TOO_LONG_NOTE.format(length=len(message.text), limit=self.max_inbound_chars)
        self.renderers.notice(key, message.turn_id, "too_long", note)

    def _registering(self, message: SlackMessage) -> functools.partial[Coroutine[Any, Any, None]]:
        """`delivery.register` for the message's thread: where its session's replies go."""
        return functools.partial(
            self.delivery.register,
            message.session_key,
            team=message.team,
            channel=message.channel,
            thread_ts=message.thread_ts,
            user_id=message.user,
            now=time.time(),
        )

    # interactivity -------------------------------------------------------------------------

    async def ack(self, ack: Ack) -> None:
        await ack()

    async def on_click(self, ack: Ack, body: dict[str, Any]) -> None:
        """Answered before the ack (see `AnswerHandler.handle`)."""
        await self.answers.handle(body, ack)

    async def on_deny_reason(self, ack: Ack, body: dict[str, Any]) -> None:
        """The Deny modal submitted: answered before the ack, as a click is."""
        await self.answers.denials.submit(body, ack)

    async def on_allow_again(self, ack: Ack, body: dict[str, Any]) -> None:
        """The "Approve & allow again" modal submitted: approved (and the grant issued) before
        the ack, as a click is; a grant the engine refuses is the ack's `errors`."""
        await self.answers.grants.submit(body, ack)

    async def on_edit_approve(self, ack: Ack, body: dict[str, Any]) -> None:
        """The "Edit & approve" modal submitted: approved with the edits before the ack, as a
        click is; an input it cannot read, or an edit the engine refuses, is the ack's `errors`
        (nothing applied)."""
        await self.answers.edits.submit(body, ack)

    async def on_revoke(self, ack: Ack, body: dict[str, Any]) -> None:
        """Revoke in the Home tab's standing grants: revoked before the ack."""
        if self.revokes is None:
            await ack()
            return
        await self.revokes.handle(body, ack)

    async def on_feedback(self, ack: Ack, body: dict[str, Any]) -> None:
        """Stored before the ack (see `FeedbackHandler.handle`)."""
        await self.feedback.handle(body, ack)

    # agent surfaces ------------------------------------------------------------------------

    async def on_stop(self, body: dict[str, Any]) -> None:
        """Slack's Stop button: the cancellation commits before the ack (`bot.slack.stops`)."""
        async with self._in_flight:
            await self.stops.on_stop(body)

    async def on_home_opened(self, body: dict[str, Any]) -> None:
        """Lazy, after the ack: the Messages tab gets the prompts (`bot.slack.agent_entry`)."""
        event = body.get("event")
        if not isinstance(event, dict) or not isinstance(event.get("user"), str):
            return
        if event.get("tab") == "messages":
            await self.entry.on_messages_tab(
                str(body.get("team_id") or ""), event["user"], str(event.get("channel") or "")
            )
        elif event.get("tab") == "home" and self.home is not None:
            view = event.get("view")
            shown = view.get("hash") if isinstance(view, dict) else None
            # Who opened it, as every surface reads a person (`bot.slack.identity`), so the inbox
            # lists what their clicks may answer.
            principal = principal_of(body)
            if principal is not None and principal.get("team"):
                try:
                    await self.home.opened(
                        principal, hash=shown if isinstance(shown, str) else None
                    )
                except SlackCallError as err:
                    log.warning("could not publish a Home tab", extra={"code": err.code})
