"""What Slack sends an agent app, as the driver sends it: agent and App Home events, clicks
from a Home tab, feedback buttons and modal submissions, with Slack's fields and only those
(`tests/bot/test_slack_payloads.py` holds them to the lists below).

- `agent_session_stopped`: https://docs.slack.dev/reference/events/agent_session_stopped
  (`channel`, `thread_ts`, `user`, `streaming_message_ts`, `event_ts`); Slack stops the app's
  streams in the thread itself, and the event lists them.
- `assistant_thread_started`: https://docs.slack.dev/reference/events/assistant_thread_started
  (`assistant_thread` with `user_id`, `channel_id`, `thread_ts` and the `context` the user was
  viewing).
- `app_home_opened`: https://docs.slack.dev/reference/events/app_home_opened (`user`,
  `channel`, `tab`, `event_ts`, and `view` once a Home tab was published).
- `block_actions` from a Home tab: https://docs.slack.dev/reference/interaction-payloads/
  block_actions-payload: a `view` container and the `view`, no `channel`, `message` or
  `response_url`.
- feedback buttons: the same payload, the action typed `feedback_buttons` with the clicked
  button's `value` (https://docs.slack.dev/reference/block-kit/block-elements/
  feedback-buttons-element).
- `view_submission`: https://docs.slack.dev/reference/interaction-payloads/view-interactions-
  payload (`view.state.values` by block and action id, `response_urls`, `trigger_id`).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from bot.testing.driver_core import DOMAIN, DriverCore

if TYPE_CHECKING:
    import httpx


class AgentDriving(DriverCore):
    """What Slack sends an agent app; `SlackDriver` is one."""

    # events --------------------------------------------------------------------------------

    def stop_event(
        self, user: str, *, channel: str, thread_ts: str, streaming: list[str]
    ) -> dict[str, Any]:
        return {
            "type": "agent_session_stopped",
            "channel": channel,
            "thread_ts": thread_ts,
            "user": user,
            "streaming_message_ts": streaming,
            "event_ts": f"{time.time():.6f}",
        }

    async def stop(
        self, user: str, *, channel: str, thread_ts: str, team_id: str | None = None
    ) -> httpx.Response:
        """`user` clicks the native Stop button on the thread's agent session: Slack stops the
        app's streams there at once, then sends the event naming them."""
        stopped: list[str] = []
        if self.standin is not None:
            for message in self.standin.thread(channel, thread_ts):
                if message.bot_id == self.standin.bot_id and message.streaming:
                    message.streaming = False
                    stopped.append(message.ts)
        event = self.stop_event(user, channel=channel, thread_ts=thread_ts, streaming=stopped)
        return await self.post_event(event, team_id=team_id)

    def thread_started_event(
        self, user: str, *, channel: str, thread_ts: str, viewing: str | None = None
    ) -> dict[str, Any]:
        context: dict[str, Any] = {"team_id": self.team_id, "enterprise_id": self.enterprise_id}
        if viewing:
            context["channel_id"] = viewing
        return {
            "type": "assistant_thread_started",
            "assistant_thread": {
                "user_id": user,
                "context": context,
                "channel_id": channel,
                "thread_ts": thread_ts,
            },
            "event_ts": f"{time.time():.6f}",
        }

    async def start_assistant_thread(
        self, user: str, *, viewing: str | None = None, team_id: str | None = None
    ) -> tuple[str, str]:
        """`user` opens a new thread with the agent (in its split view or the app's DM): Slack
        makes the thread, then sends the event. Returns (channel, thread_ts)."""
        channel, thread_ts = self.dm_channel(user), self.new_ts()
        if self.standin is not None:
            self.standin.add_user_message(channel, thread_ts, user, "")
        event = self.thread_started_event(
            user, channel=channel, thread_ts=thread_ts, viewing=viewing
        )
        response = await self.post_event(event, team_id=team_id)
        response.raise_for_status()
        return channel, thread_ts

    def home_opened_event(self, user: str, *, tab: str) -> dict[str, Any]:
        event: dict[str, Any] = {
            "type": "app_home_opened",
            "user": user,
            "channel": self.dm_channel(user),
            "tab": tab,
            "event_ts": f"{time.time():.6f}",
        }
        shown = self.standin.home_views.get(user) if self.standin is not None else None
        if tab == "home" and shown is not None:
            event["view"] = self._view_json(shown.id)
        return event

    async def open_home(
        self, user: str, *, tab: str = "home", team_id: str | None = None
    ) -> httpx.Response:
        """`user` opens the app's Home tab (`tab="home"`) or its Messages tab (`"messages"`)."""
        return await self.post_event(self.home_opened_event(user, tab=tab), team_id=team_id)

    def _view_json(self, view_id: str) -> dict[str, Any]:
        standin = self.standin
        assert standin is not None
        views = [*standin.home_views.values(), *standin.modals]
        view = next(v for v in views if v.id == view_id)
        return view.to_json(self.team_id, self.api_app_id, standin.bot_id)

    # interactions --------------------------------------------------------------------------

    def _who(self, user: str, team_id: str | None) -> dict[str, Any]:
        team = team_id or self.team_id
        return {
            "user": {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team},
            "api_app_id": self.api_app_id,
            "token": "legacy-verification-token",
            "team": {"id": team, "domain": DOMAIN},
            "enterprise": {"id": self.enterprise_id} if self.enterprise_id else None,
            "is_enterprise_install": False,
        }

    async def _interaction(self, payload: dict[str, Any]) -> httpx.Response:
        body = urlencode({"payload": json.dumps(payload)})
        return await self.send(body, content_type="application/x-www-form-urlencoded")

    def home_click_payload(
        self, user: str, button: dict[str, Any], *, team_id: str | None = None
    ) -> dict[str, Any]:
        standin = self.standin
        assert standin is not None, "a Home tab click needs the stand-in that holds the view"
        view = standin.home_views[user]
        return {
            "type": "block_actions",
            **self._who(user, team_id),
            "container": {"type": "view", "view_id": view.id},
            "trigger_id": self.trigger(user),
            "view": {**self._view_json(view.id), "state": {"values": {}}},
            "actions": [_action(button)],
        }

    async def click_in_home(
        self, user: str, button: dict[str, Any], *, team_id: str | None = None
    ) -> httpx.Response:
        """Click a button of the Home tab `user` sees (a dict as found in its blocks)."""
        return await self._interaction(self.home_click_payload(user, button, team_id=team_id))

    def feedback_payload(
        self,
        user: str,
        element: dict[str, Any],
        positive: bool,
        *,
        channel: str,
        message_ts: str,
        thread_ts: str | None,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        button = element["positive_button" if positive else "negative_button"]
        return {
            "type": "block_actions",
            **self._who(user, team_id),
            "container": {
                "type": "message",
                "message_ts": message_ts,
                "channel_id": channel,
                "is_ephemeral": False,
                "thread_ts": thread_ts,
            },
            "trigger_id": self.trigger(user),
            "channel": {"id": channel, "name": "demo"},
            "message": {"type": "message", "ts": message_ts, "thread_ts": thread_ts},
            "response_url": "https://hooks.slack.invalid/actions/feedback",
            "actions": [
                {
                    "type": "feedback_buttons",
                    "action_id": element.get("action_id", ""),
                    "block_id": element.get("block_id", "feedback"),
                    "value": button["value"],
                    "text": button["text"],
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

    async def feedback(
        self,
        user: str,
        element: dict[str, Any],
        positive: bool,
        *,
        channel: str,
        message_ts: str,
        thread_ts: str | None,
        team_id: str | None = None,
    ) -> httpx.Response:
        """Click 👍 (`positive`) or 👎 on a reply's feedback buttons (the element's dict)."""
        payload = self.feedback_payload(
            user,
            element,
            positive,
            channel=channel,
            message_ts=message_ts,
            thread_ts=thread_ts,
            team_id=team_id,
        )
        return await self._interaction(payload)

    def submission_payload(
        self,
        user: str,
        view_id: str,
        values: dict[str, dict[str, Any]],
        *,
        team_id: str | None = None,
    ) -> dict[str, Any]:
        """`values`: {block_id: {action_id: what the person entered}}: the text typed in a
        text or number input, the value (or the text) of the option chosen in a select or
        radio buttons (an option's dict: one the modal did not offer, as a forged client
        sends). Every other input of the modal is sent as Slack sends it, with its initial
        value; an input the modal does not have, as a plain text input (a forged client)."""
        standin = self.standin
        modal = next((v for v in standin.modals if v.id == view_id), None) if standin else None
        state = state_values(modal.body.get("blocks", []) if modal else [], values)
        return {
            "type": "view_submission",
            **self._who(user, team_id),
            "trigger_id": self.trigger(user),
            "view": {**self._view_json(view_id), "state": {"values": state}},
            "response_urls": [],
        }

    async def submit(
        self,
        user: str,
        view_id: str,
        values: dict[str, dict[str, Any]],
        *,
        team_id: str | None = None,
    ) -> httpx.Response:
        """`user` presses the modal's submit button."""
        payload = self.submission_payload(user, view_id, values, team_id=team_id)
        return await self._interaction(payload)


def _action(button: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": button["action_id"],
        "block_id": button.get("block_id", "home"),
        "value": button.get("value", ""),
        "text": button.get("text", {"type": "plain_text", "text": "?"}),
        "action_ts": f"{time.time():.6f}",
    }


UNSET: Any = object()
SELECTS = ("static_select", "radio_buttons")


def element_state(element: dict[str, Any], given: Any) -> dict[str, Any]:
    """An input's entry in `view.state.values`: `{"type", "value"}` for a text or number input,
    `{"type", "selected_option"}` for a select or radio buttons; `given` UNSET: as the modal
    showed it."""
    kind = str(element.get("type"))
    if kind not in SELECTS:
        return {"type": kind, "value": element.get("initial_value") if given is UNSET else given}
    if given is UNSET:
        chosen = element.get("initial_option")
    elif given is None or isinstance(given, dict):
        chosen = given
    else:
        options = element.get("options") or []
        found = [o for o in options if given in (o.get("value"), o.get("text", {}).get("text"))]
        if not found:
            raise ValueError(f"the modal offers no option {given!r}")
        chosen = found[0]
    return {"type": kind, "selected_option": chosen}


def state_values(
    blocks: list[dict[str, Any]], values: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """`view.state.values` of a submission: every input block of the modal (Slack sends each,
    https://docs.slack.dev/reference/interaction-payloads/view-interactions-payload), with what
    `values` says was entered in it."""
    state: dict[str, dict[str, Any]] = {}
    for block in blocks:
        element = block.get("element") if block.get("type") == "input" else None
        block_id = block.get("block_id")
        action_id = element.get("action_id") if isinstance(element, dict) else None
        if not isinstance(element, dict) or not block_id or not action_id:
            continue
        given = values.get(block_id, {}).get(action_id, UNSET)
        state.setdefault(block_id, {})[action_id] = element_state(element, given)
    for block_id, actions in values.items():
        for action_id, text in actions.items():
            entry = {"type": "plain_text_input", "value": text}
            state.setdefault(block_id, {}).setdefault(action_id, entry)
    return state
