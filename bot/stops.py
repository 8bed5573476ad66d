"""Slack's native Stop button on an agent session: the thread's unfinished turn stops.

Slack shows Stop while the session is `processing` and, when a person clicks it, stops the app's
streams in the thread itself and sends `agent_session_stopped` with the channel, the thread, the
person and the streams it stopped (https://docs.slack.dev/reference/events/
agent_session_stopped). The app must stop the work, say so, and move the session away from
`processing`; Slack does not.

Here that is one engine call, committed before the ack (as a message's turn is), so a crash
cannot lose a Stop Slack saw acknowledged: `session.stop(by=<person>)` cancels every unfinished
turn of the thread's session, a turn parked for an approval included (unlike a newer message,
which never ends a park). The cancellation is durable and takes effect at the turn's next
checkpoint: the model is not called again. The thread's renderer then shows it (the reply ends
"stopped by …", an approval loses its buttons and says who stopped it) and sets the session
`active`.

Who may stop: the event is signed, and it names a thread of the workspace it was sent for (its
envelope's `team_id`); the session is looked up in that workspace only, so a Stop from another
workspace finds nothing to stop. Where Slack says whose workspace the person is from
(`user_team`, as it does for messages in channels shared between workspaces), a person of
another workspace stops nothing either.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent import Agent, Runtime
from bot.inbound import is_slack_id, is_slack_ts, session_key
from storage.delivery.store import DeliveryStore

if TYPE_CHECKING:
    from bot.rendering.pool import RendererPool  # which renders what this module's STOPPED means

log = logging.getLogger(__name__)

STOPPED = "stopped"
"""The cancellation reason a Stop gives its turns."""


@dataclass(frozen=True, kw_only=True)
class StopRequest:
    team: str
    user: str
    channel: str
    thread_ts: str
    user_team: str | None

    @classmethod
    def parse(cls, body: dict[str, Any]) -> StopRequest | None:
        event = body.get("event")
        if not isinstance(event, dict):
            return None
        team, user = body.get("team_id"), event.get("user")
        channel, thread_ts = event.get("channel"), event.get("thread_ts")
        user_team = event.get("user_team")
        if not (
            is_slack_id(team)
            and is_slack_id(user)
            and is_slack_id(channel)
            and is_slack_ts(thread_ts)
        ):
            return None
        return cls(
            team=team,
            user=user,
            channel=channel,
            thread_ts=thread_ts,
            user_team=user_team if is_slack_id(user_team) else None,
        )

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
        renderers: RendererPool,
    ) -> None:
        self.runtime = runtime
        self.agent = agent
        self.delivery = delivery
        self.renderers = renderers

    async def on_stop(self, body: dict[str, Any]) -> None:
        """Before the ack: the turns' cancellation is committed when Slack hears back."""
        stop = StopRequest.parse(body)
        if stop is None:
            log.info("an agent_session_stopped event without its ids was ignored")
            return
        if stop.user_team is not None and stop.user_team != stop.team:
            log.info("a Stop by a person of another workspace was ignored")
            return
        key = stop.session_key
        target = await self.delivery.get_target(key, urgent=True)
        if target is None or target.team != stop.team:
            log.info("a Stop for a thread with no conversation of the bot's was ignored")
            return
        stopped = await self._stop(key, stop.user)
        log.info("stopped", extra={"session": key, "turns": len(stopped)})
        # The renderer shows the stop and moves the session out of `processing`; woken even
        # when nothing ran, since Slack left the session as it was when the person clicked.
        await self.delivery.mark_active(key, time.time())
        self.renderers.kick(key)

    async def _stop(self, key: str, by: str) -> list[str]:
        """Cancel the session's unfinished turns durably, parked ones included (one engine call,
        the same any surface's Stop makes)."""
        session = self.runtime.session(self.agent, key)
        return await session.stop(by=by, reason=STOPPED)
