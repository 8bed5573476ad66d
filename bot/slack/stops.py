"""Slack's native Stop button on an agent session: the thread's unfinished turn stops.

Slack shows Stop while the session is `processing` and, when a person clicks it, stops the app's
streams in the thread itself and sends `agent_session_stopped` with the channel, the thread, the
person and the streams it stopped (https://docs.slack.dev/reference/events/
agent_session_stopped). The app must stop the work, say so, and move the session away from
`processing`; Slack does not.

Here that is one engine call, committed before the ack (as a message's turn is), so a crash
cannot lose a Stop Slack saw acknowledged: `session.stop(principal=<person>)` cancels the
unfinished turns of the thread's session that are the person's to stop, a turn parked for an
approval included (unlike a newer message, which never ends a park). The cancellation is
durable and takes effect at the turn's next checkpoint: the model is not called again. The
thread's renderer then shows it (the reply ends "stopped by …", an approval loses its
buttons and says who stopped it) and sets the session `active`.

Who may stop (one engine check, `agent._stop_rights`, the one the HTTP API's cancel makes): a
turn parked for an approval, whoever may answer it and the person who asked (ending it is a
Deny by another name); a running one, the person who asked, or whom the agent's
`authorize_answer` admits for policy `"stop"` (another person's message queued behind it is
theirs, and still gets its answer). Anyone with none to stop is told so in the thread, only to
them (ephemeral), and nothing changes: the turn runs on, and since Slack has already stopped
its streams when it sends the event, the renderer carries the reply on in the same message
(`message_not_in_streaming_state` is continued with `chat.update`). The person is read as every
surface reads one (`bot.slack.identity`): a person of another workspace (`user_team`, in channels
shared between workspaces) may stop nothing. The event names a thread of the workspace it was
sent for; the session is looked up there only, so a Stop from another workspace finds nothing.

`bot cancel` (an operator holding the database) names nobody and may stop anything; the thread
then says an operator stopped it (`bot.slack.stop_reasons.OPERATOR`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent import Agent, CancelReason, Principal, Runtime, StopAuthorizationError
from bot.slack.calls import SlackCallError, call
from bot.slack.clients import SlackClients
from bot.slack.identity import principal_of, workspace_of
from bot.slack.inbound import is_slack_id, is_slack_ts, session_key
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)

NOT_YOURS = "You can't stop this: {why}. Nothing was stopped."
UNCHECKED = "I couldn't check whether you may stop this just now; nothing was stopped."


@dataclass(frozen=True, kw_only=True)
class StopRequest:
    team: str
    """The workspace the event was sent for: its conversations are the ones looked up."""
    principal: Principal
    """Who pressed Stop, in their own workspace."""
    channel: str
    thread_ts: str

    @property
    def user(self) -> str:
        return str(self.principal.get("user"))

    @classmethod
    def parse(cls, body: dict[str, Any]) -> StopRequest | None:
        event = body.get("event")
        if not isinstance(event, dict):
            return None
        team, principal = workspace_of(body).team, principal_of(body)
        channel, thread_ts = event.get("channel"), event.get("thread_ts")
        if not (
            is_slack_id(team)
            and principal is not None
            and is_slack_id(channel)
            and is_slack_ts(thread_ts)
        ):
            return None
        return cls(team=team, principal=principal, channel=channel, thread_ts=thread_ts)

    @property
    def session_key(self) -> str:
        return session_key(self.team, self.channel, self.thread_ts)


class Stops:
    def __init__(
        self,
        *,
        runtime: Runtime,
        agent: Agent,
        delivery: DeliveryStore,
        clients: SlackClients,
        kick: Callable[[str], None],
    ) -> None:
        """`clients`: to tell a person their Stop was refused; `kick`: wakes the session's
        renderer (`RendererPool.kick`), which shows the stop. A callable, not the pool, so
        this handler names nothing of `bot.slack.rendering`."""
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.clients = clients
        self.kick = kick
        self._telling: set[asyncio.Task[None]] = set()

    async def on_stop(self, body: dict[str, Any]) -> None:
        """Before the ack: the turns' cancellation is committed when Slack hears back."""
        stop = StopRequest.parse(body)
        if stop is None:
            log.info("an agent_session_stopped event without its ids was ignored")
            return
        key = stop.session_key
        target = await self.delivery.get_target(key, urgent=True)
        if target is None or target.team != stop.team:
            log.info("a Stop for a thread with no conversation of the bot's was ignored")
            return
        session = self.runtime.session(self.agent, key)
        try:
            stopped = await session.stop(principal=stop.principal, reason=CancelReason.STOPPED)
        except StopAuthorizationError as refused:
            log.info("a Stop by someone who may not stop these turns was refused")
            self._tell(stop, NOT_YOURS.format(why=refused))
            return
        except Exception:
            # The agent's policy hook failed: nothing was stopped, and Slack is not made to
            # retry a click the person can simply repeat.
            log.exception("could not tell whether this person may stop", extra={"session": key})
            self._tell(stop, UNCHECKED)
            return
        log.info("stopped", extra={"session": key, "turns": len(stopped)})
        # The renderer shows the stop and moves the session out of `processing`; woken even
        # when nothing ran, since Slack left the session as it was when the person clicked.
        await self.delivery.mark_active(key, time.time())
        self.kick(key)

    def _tell(self, stop: StopRequest, text: str) -> None:
        """Only to the person, in the thread, after the ack (a Slack call may wait); the turn,
        if running, is still shown: its renderer carries on the reply Slack stopped streaming."""
        task = asyncio.create_task(self._post_ephemeral(stop, text))
        self._telling.add(task)
        task.add_done_callback(self._telling.discard)

    async def _post_ephemeral(self, stop: StopRequest, text: str) -> None:
        try:
            client = await self.clients.for_team(stop.team)
            await call(
                "chat.postEphemeral",
                lambda: client.chat_postEphemeral(
                    channel=stop.channel, user=stop.user, text=text, thread_ts=stop.thread_ts
                ),
            )
        except SlackCallError as err:
            log.warning("could not tell a person their Stop was refused", extra={"code": err.code})
