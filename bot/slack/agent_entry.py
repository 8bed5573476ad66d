"""Where a person starts a conversation with the agent: a new assistant thread, or the app's
Messages tab (its DM). Each gets a greeting and the agent's suggested prompts.

- `assistant_thread_started` (https://docs.slack.dev/reference/events/assistant_thread_started),
  sent to an app on Slack's assistant surface (`features.assistant_view`) when a person opens a
  new thread with it: the thread gets a greeting (once, however often Slack delivers the event)
  and the prompts (`assistant.threads.setSuggestedPrompts` with the thread,
  https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts).
- `app_home_opened` with `tab: "messages"` (https://docs.slack.dev/reference/events/
  app_home_opened): under `features.agent_view`, the current agent surface that `manifest.yml`
  declares, Slack sends no `assistant_thread_started`; the Messages tab is the entry point, and
  the prompts are pinned to the DM (`setSuggestedPrompts` without a thread), their title the
  greeting. Slack's own agent samples do the same (slack-samples/bolt-python-support-agent,
  "update app manifest to use agent_view").

The prompts are the agent's own (`Agent.suggested_prompts`, loaded from its directory), at most
four (Slack takes 1 to 4). An agent without any gets the greeting alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agent import Agent
from bot.slack.calls import SlackCallError, call
from bot.slack.clients import SlackClients
from bot.slack.inbound import is_slack_id, is_slack_ts, session_key
from bot.slack.rendering.pool import RendererPool
from storage.delivery.store import DeliveryStore

log = logging.getLogger(__name__)
Ack = Callable[..., Awaitable[Any]]

MAX_PROMPTS = 4
GREETING = "Hi <@{user}>! I'm {name}. What can I do for you?"
PROMPTS_TITLE = "Try one of these:"
MESSAGES_TITLE = "What can I do for you?"


@dataclass(frozen=True)
class Prompt:
    title: str
    message: str


def suggested_prompts(agent: Agent) -> list[Prompt]:
    """The agent's suggested prompts (`prompts.md` in its directory), as Slack takes them: at
    most four, each a non-empty title and message."""
    found = [
        Prompt(title=p.title[:75], message=p.message)
        for p in agent.suggested_prompts
        if p.title.strip() and p.message.strip()
    ]
    return found[:MAX_PROMPTS]


class AgentEntry:
    def __init__(
        self,
        *,
        agent: Agent,
        delivery: DeliveryStore,
        renderers: RendererPool,
        clients: SlackClients,
    ) -> None:
        self.agent = agent
        self.delivery = delivery
        self.renderers = renderers
        self.clients = clients

    async def ack(self, ack: Ack) -> None:
        await ack()

    async def on_thread_started(self, body: dict[str, Any]) -> None:
        """Lazy, after the ack: greet in the new thread and set its prompts."""
        event = body.get("event") or {}
        thread = event.get("assistant_thread") if isinstance(event, dict) else None
        if not isinstance(thread, dict):
            return
        team, user = body.get("team_id"), thread.get("user_id")
        channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
        if not (
            is_slack_id(team)
            and is_slack_id(user)
            and is_slack_id(channel)
            and is_slack_ts(thread_ts)
        ):
            log.info("an assistant_thread_started event without its ids was ignored")
            return
        key = session_key(team, channel, thread_ts)
        # Replies in this thread are the agent's (a DM, so every message starts a turn); the
        # greeting is posted once per thread, however often Slack delivers the event.
        await self.delivery.register(
            key, team=team, channel=channel, thread_ts=thread_ts, user_id=user, now=time.time()
        )
        text = GREETING.format(user=user, name=self.agent.name)
        self.renderers.notice(key, "greeting", "greeting", text)
        prompts = suggested_prompts(self.agent)
        if prompts:
            await self._prompts(team, channel, thread_ts, PROMPTS_TITLE, prompts)

    async def on_messages_tab(self, team: str, user: str, channel: str) -> None:
        """The person opened the app's Messages tab: the prompts, titled with the greeting."""
        prompts = suggested_prompts(self.agent)
        if prompts and is_slack_id(channel) and is_slack_id(team):
            await self._prompts(team, channel, None, MESSAGES_TITLE, prompts)

    async def _prompts(
        self, team: str, channel: str, thread_ts: str | None, title: str, prompts: list[Prompt]
    ) -> None:
        listed = [{"title": p.title, "message": p.message} for p in prompts]
        try:
            client = await self.clients.for_team(team)
            await call(
                "assistant.threads.setSuggestedPrompts",
                lambda: client.assistant_threads_setSuggestedPrompts(
                    channel_id=channel, thread_ts=thread_ts, title=title, prompts=listed
                ),
            )
        except SlackCallError as err:
            log.warning("could not set the suggested prompts", extra={"code": err.code})
