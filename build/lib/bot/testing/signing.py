"""Send Slack-shaped, correctly signed requests to a running app over HTTP.

Payload shapes follow the Events API envelope, `block_actions` interactivity, slash commands and
message shortcuts (here), and what Slack sends an agent app (`bot.testing.agent_events`), with
Slack's fields and only those (`tests/bot/test_slack_payloads.py` holds them to Slack's lists):
a test proven on a payload Slack never sends proves nothing.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx

from bot.testing.agent_events import AgentDriving
from bot.testing.driver_core import DOMAIN, sign_request

__all__ = ["DOMAIN", "SlackDriver", "sign_request"]


class SlackDriver(AgentDriving):
    """Plays Slack's side: events, button clicks, slash commands, shortcuts, and what Slack
    sends an agent app, each signed."""

    # events --------------------------------------------------------------------------------

    def mention_event(
        self, user: str, text: str, *, channel: str, ts: str, thread_ts: str | None = None
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "app_mention",
            "user": user,
            "text": f"<@{self.bot_user_id}> {text}",
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "team": self.team_id,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    def message_event(
        self,
        user: str | None,
        text: str,
        *,
        channel: str,
        ts: str,
        thread_ts: str | None = None,
        channel_type: str = "channel",
        **extra: Any,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "message",
            "text": text,
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "channel_type": channel_type,
            "team": self.team_id,
            **extra,
        }
        if user is not None:
            event["user"] = user
        if thread_ts:
            event["thread_ts"] = thread_ts
        return event

    async def mention(
        self,
        user: str,
        text: str,
        *,
        channel: str,
        ts: str | None = None,
        thread_ts: str | None = None,
        twin: bool = False,
    ) -> str:
        """A person mentions the bot; with `twin`, the `message` event Slack also sends."""
        ts = ts or self.new_ts()
        if self.standin is not None:
            self.standin.add_user_message(
                channel, ts, user, f"<@{self.bot_user_id}> {text}", thread_ts
            )
        event = self.mention_event(user, text, channel=channel, ts=ts, thread_ts=thread_ts)
        response = await self.post_event(event)
        response.raise_for_status()
        if twin:
            message = self.message_event(
                user, event["text"], channel=channel, ts=ts, thread_ts=thread_ts
            )
            (await self.post_event(message)).raise_for_status()
        return ts

    async def reply(
        self,
        user: str,
        text: str,
        *,
        channel: str,
        thread_ts: str,
        ts: str | None = None,
        channel_type: str = "channel",
    ) -> str:
        """A follow-up message in a thread (no mention)."""
        ts = ts or self.new_ts()
        if self.standin is not None:
            self.standin.add_user_message(channel, ts, user, text, thread_ts)
        event = self.message_event(
            user, text, channel=channel, ts=ts, thread_ts=thread_ts, channel_type=channel_type
        )
        (await self.post_event(event)).raise_for_status()
        return ts

    # interactivity -------------------------------------------------------------------------

    def click_payload(
        self,
        user: str,
        button: dict[str, Any],
        *,
        channel: str,
        message_ts: str,
        thread_ts: str | None = None,
        response_url: str = "https://hooks.slack.invalid/actions/1",
        enterprise_id: str | None = None,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """The `block_actions` payload of a click on a Block Kit button (a dict as found in the
        posted message's blocks), as `user` of this driver's workspace, or of `team_id` /
        `enterprise_id` when given."""
        team = team_id or self.team_id
        enterprise_id = enterprise_id or self.enterprise_id
        return {
            "type": "block_actions",
            "user": {"id": user, "username": user.lower(), "team_id": team},
            "api_app_id": self.api_app_id,
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
                "thread_ts": thread_ts,
            },
            "trigger_id": self.trigger(user),
            "team": {"id": team, "domain": DOMAIN},
            "enterprise": {"id": enterprise_id} if enterprise_id else None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": "demo"},
            "message": {"type": "message", "ts": message_ts, "thread_ts": thread_ts},
            "response_url": response_url,
            "actions": [
                {
                    "type": "button",
                    "action_id": button["action_id"],
                    "block_id": button.get("block_id", "approval"),
                    "value": button.get("value", ""),
                    "text": button.get("text", {"type": "plain_text", "text": "?"}),
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

    async def click(
        self,
        user: str,
        button: dict[str, Any],
        *,
        channel: str,
        message_ts: str,
        thread_ts: str | None = None,
        response_url: str = "https://hooks.slack.invalid/actions/1",
        enterprise_id: str | None = None,
        team_id: str | None = None,
    ) -> httpx.Response:
        """Click a button (`click_payload`), signed and posted as Slack posts it."""
        payload = self.click_payload(
            user,
            button,
            channel=channel,
            message_ts=message_ts,
            thread_ts=thread_ts,
            response_url=response_url,
            enterprise_id=enterprise_id,
            team_id=team_id,
        )
        body = urlencode({"payload": json.dumps(payload)})
        return await self.send(body, content_type="application/x-www-form-urlencoded")

    def command_form(
        self,
        user: str,
        command: str,
        text: str = "",
        *,
        channel: str,
        response_url: str = "https://hooks.slack.invalid/commands/1",
    ) -> dict[str, str]:
        """The form Slack posts for a slash command: Slack's fields and no others.

        There is no thread here, and no way to add one: Slack runs an app's slash command only
        outside threads, so its request never has a `thread_ts` (a thread is named, if at all,
        in `text`). A Grid workspace's request also names its org.
        """
        form = {
            "token": "legacy-verification-token",
            "team_id": self.team_id,
            "team_domain": DOMAIN,
            "channel_id": channel,
            "channel_name": "demo",
            "user_id": user,
            "user_name": user.lower(),
            "command": command,
            "text": text,
            "api_app_id": self.api_app_id,
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": self.trigger(user),
        }
        if self.enterprise_id:
            form["enterprise_id"] = self.enterprise_id
            form["enterprise_name"] = "Demo Org"
        return form

    async def command(
        self,
        user: str,
        command: str,
        text: str = "",
        *,
        channel: str,
        response_url: str = "https://hooks.slack.invalid/commands/1",
    ) -> httpx.Response:
        form = self.command_form(user, command, text, channel=channel, response_url=response_url)
        return await self.send(urlencode(form), content_type="application/x-www-form-urlencoded")

    # shortcuts -----------------------------------------------------------------------------

    def message_shortcut_payload(
        self,
        user: str,
        callback_id: str,
        *,
        channel: str,
        message_ts: str,
        thread_ts: str | None = None,
        response_url: str | None = "https://hooks.slack.invalid/app/1",
        team_id: str | None = None,
        user_team_id: str | None = None,
    ) -> dict[str, Any]:
        """The `message_action` payload Slack posts when `user` picks a message shortcut from a
        message's menu.

        It names the message whole (`message`, with `thread_ts` where it is in a thread or is a
        thread's first message) and where it is. The message comes from the stand-in when it
        holds it, as Slack sends what the channel shows; otherwise from `message_ts` and
        `thread_ts`. `team_id`: the workspace the shortcut was used in (this driver's by
        default); `user_team_id`: the person's own workspace, another one for a guest from a
        workspace the channel is shared with. `response_url=None` leaves it out.
        """
        team = team_id or self.team_id
        workspace: dict[str, Any] = {"id": team, "domain": DOMAIN}
        enterprise = None
        if self.enterprise_id:
            workspace.update(enterprise_id=self.enterprise_id, enterprise_name="Demo Org")
            enterprise = {"id": self.enterprise_id, "name": "Demo Org"}
        payload: dict[str, Any] = {
            "type": "message_action",
            "token": "legacy-verification-token",
            "action_ts": f"{time.time():.6f}",
            "team": workspace,
            "user": {
                "id": user,
                "name": user.lower(),
                "username": user.lower(),
                "team_id": user_team_id or team,
            },
            "channel": {"id": channel, "name": "demo"},
            "is_enterprise_install": False,
            "enterprise": enterprise,
            "callback_id": callback_id,
            "trigger_id": self.trigger(user),
            "message_ts": message_ts,
            "message": self._message_as_slack_shows_it(channel, message_ts, thread_ts),
        }
        if response_url is not None:
            payload["response_url"] = response_url
        return payload

    async def message_shortcut(
        self,
        user: str,
        callback_id: str,
        *,
        channel: str,
        message_ts: str,
        thread_ts: str | None = None,
        response_url: str | None = "https://hooks.slack.invalid/app/1",
        team_id: str | None = None,
        user_team_id: str | None = None,
    ) -> httpx.Response:
        payload = self.message_shortcut_payload(
            user,
            callback_id,
            channel=channel,
            message_ts=message_ts,
            thread_ts=thread_ts,
            response_url=response_url,
            team_id=team_id,
            user_team_id=user_team_id,
        )
        body = urlencode({"payload": json.dumps(payload)})
        return await self.send(body, content_type="application/x-www-form-urlencoded")

    def _message_as_slack_shows_it(
        self, channel: str, ts: str, thread_ts: str | None
    ) -> dict[str, Any]:
        standin = self.standin
        held = standin.find(channel, ts) if standin is not None else None
        if standin is None or held is None:
            message: dict[str, Any] = {"type": "message", "ts": ts, "text": ""}
            if thread_ts:
                message["thread_ts"] = thread_ts
            return message
        message = held.to_json(with_metadata=False)
        if held.bot_id:
            message["user"] = self.bot_user_id
        replies = [m for m in standin.thread(channel, ts) if m.ts != ts]
        if not held.thread_ts and replies:
            # A thread's first message says it is one once it has replies.
            message.update(thread_ts=ts, reply_count=len(replies))
        return message
