"""The stand-in's agent surfaces: agent sessions, assistant threads, the App Home and modals.

Each method answers as Slack's reference for it says, refusing what it refuses:

- `agents.sessions.setStatus` (https://docs.slack.dev/reference/methods/agents.sessions.setStatus,
  https://docs.slack.dev/ai/agent-sessions): `status` one of active, processing, suspended,
  closed; `thread_ts` required in a channel or DM (thread-based sessions), `channel_id` too; the
  first call creates the session, and only that one sets its `title` (at most 200 characters)
  and initiator. While the app does not subscribe to `agent_session_stopped` the answer carries
  the `missing_agent_session_stopped_event_subscription` warning
  (https://docs.slack.dev/reference/events/agent_session_stopped).
- `chat.stopStream(session_status=...)`: the same four statuses, set on the thread's session.
- `assistant.threads.setStatus` takes at most 10 `loading_messages`;
  `assistant.threads.setSuggestedPrompts` 1 to 4 prompts, each a `title` and a `message`
  (https://docs.slack.dev/reference/methods/assistant.threads.setSuggestedPrompts);
  `assistant.threads.setTitle` a title.
- `views.publish` (https://docs.slack.dev/reference/methods/views.publish): a `home` view whose
  blocks Slack takes (`invalid_blocks` otherwise), `not_enabled` while the app has no Home tab,
  `hash_conflict` when `hash` is not the one of the view the user sees, `view_too_large`.
- `views.open` (https://docs.slack.dev/reference/methods/views.open): a `modal`, with a trigger
  Slack issued (`invalid_trigger_id`), once (`exchanged_trigger_id`), within 3 seconds of the
  interaction (`expired_trigger_id`).
- `chat.getPermalink` (https://docs.slack.dev/reference/methods/chat.getPermalink): a message
  the channel holds (`message_not_found`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from bot.testing.blocks import view_problem
from bot.testing.workspace import AgentSession, View, Workspace

SESSION_STATUSES = frozenset({"active", "processing", "suspended", "closed"})
MISSING_STOP_SUBSCRIPTION = "missing_agent_session_stopped_event_subscription"
TRIGGER_LIFETIME = 3.0
MAX_LOADING_MESSAGES = 10
MAX_PROMPTS = 4
MAX_SESSION_TITLE = 200


def _invalid(why: str) -> dict[str, Any]:
    return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [why]}}


class AgentSurfaces(Workspace):
    """Mixed into `SlackStandIn`; the attributes below are its settings."""

    events: frozenset[str]
    """The app's event subscriptions (its manifest's `bot_events`)."""
    agent_app: bool
    """Declared an agent in its settings (`features.agent_view`): only then may it keep agent
    sessions."""
    home_tab: bool
    domain: str
    app_id: str
    trigger_lifetime: float = TRIGGER_LIFETIME
    """Slack's three seconds for a `trigger_id`. A suite on a busy machine may lengthen it for
    tests about something else (a click under load can take longer than three seconds to reach
    `views.open`); the rule itself, and what the bot does past it, are tested at three."""

    # agent sessions ------------------------------------------------------------------------

    def _set_session_status(self, args: dict[str, Any]) -> dict[str, Any]:
        status = args.get("status")
        channel, thread_ts = str(args.get("channel_id") or ""), str(args.get("thread_ts") or "")
        if status not in SESSION_STATUSES:
            return _invalid(f"status must be one of {', '.join(sorted(SESSION_STATUSES))}")
        if not channel:
            return _invalid("channel_id is required for a thread-based session")
        if not thread_ts:
            return _invalid("thread_ts is required for a thread-based session")
        if not self.agent_app:
            # Slack documents no code for an app that is not declared an agent; this one is
            # what the renderer sees as "not here" (any refusal reads the same to it).
            return {"ok": False, "error": "not_allowed"}
        if not self.thread(channel, thread_ts):
            return {"ok": False, "error": "thread_not_found"}
        title = args.get("title")
        if title is not None and (not isinstance(title, str) or len(title) > MAX_SESSION_TITLE):
            return _invalid("title is at most 200 characters")
        session = self.sessions.get((channel, thread_ts))
        if session is None:
            session = self.sessions[(channel, thread_ts)] = AgentSession(
                channel=channel,
                thread_ts=thread_ts,
                status=str(status),
                title=title,
                initiator=args.get("initiator_user_id"),
            )
        session.status = str(status)
        session.history.append(str(status))
        answer: dict[str, Any] = {
            "ok": True,
            "status": session.status,
            "agent_status": session.status,
            "title": session.title,
        }
        if "agent_session_stopped" not in self.events:
            answer["warning"] = MISSING_STOP_SUBSCRIPTION
            answer["response_metadata"] = {"warnings": [MISSING_STOP_SUBSCRIPTION]}
        return answer

    def stream_session_status(self, channel: str, thread_ts: str | None, status: Any) -> str | None:
        """Apply `chat.stopStream`'s `session_status`; the refusal's reason, or None."""
        if status is None:
            return None
        if status not in SESSION_STATUSES:
            return "session_status must be one of active, processing, suspended, closed"
        if thread_ts and self.agent_app:
            session = self.sessions.setdefault(
                (channel, thread_ts),
                AgentSession(channel=channel, thread_ts=thread_ts, status=str(status)),
            )
            session.status = str(status)
            session.history.append(str(status))
        return None

    # assistant threads ---------------------------------------------------------------------

    def _thread_status(self, args: dict[str, Any]) -> dict[str, Any] | None:
        """The loading messages' rule; None when they are fine."""
        loading = args.get("loading_messages")
        if loading is None:
            return None
        if (
            not isinstance(loading, list)
            or len(loading) > MAX_LOADING_MESSAGES
            or not all(isinstance(m, str) and m for m in loading)
        ):
            return _invalid("loading_messages is a list of at most 10 strings")
        return None

    def _set_suggested_prompts(self, args: dict[str, Any]) -> dict[str, Any]:
        prompts = args.get("prompts")
        if not args.get("channel_id"):
            return {"ok": False, "error": "channel_not_found"}
        if (
            not isinstance(prompts, list)
            or not 0 < len(prompts) <= MAX_PROMPTS
            or not all(
                isinstance(p, dict)
                and set(p) == {"title", "message"}
                and all(isinstance(v, str) and v for v in p.values())
                for p in prompts
            )
        ):
            return _invalid("prompts: 1 to 4 objects, each a title and a message")
        self.suggested_prompts.append(dict(args))
        return {"ok": True}

    def _set_title(self, args: dict[str, Any]) -> dict[str, Any]:
        if not args.get("channel_id") or not args.get("thread_ts"):
            return _invalid("channel_id and thread_ts are required")
        if not str(args.get("title") or ""):
            return _invalid("title is required")
        self.titles.append(dict(args))
        return {"ok": True}

    # views ---------------------------------------------------------------------------------

    def _view_json(self, view: View) -> dict[str, Any]:
        return view.to_json(self.team_id, self.app_id, self.bot_id)

    def _hash(self, body: Any) -> str:
        digest = hashlib.sha256(repr(body).encode()).hexdigest()[:16]
        return f"{self.clock():.6f}.{digest}"

    def _publish(self, args: dict[str, Any]) -> dict[str, Any]:
        user = str(args.get("user_id") or "")
        if not user:
            return _invalid("user_id is required")
        problem = view_problem(args.get("view"), kind="home")
        if problem is not None:
            code, why = problem
            return {"ok": False, "error": code, "response_metadata": {"messages": [why]}}
        if not self.home_tab:
            return {"ok": False, "error": "not_enabled"}
        current = self.home_views.get(user)
        given = args.get("hash")
        if given is not None and (current is None or current.hash != given):
            return {"ok": False, "error": "hash_conflict"}
        body = dict(args["view"])
        view = View(
            id=current.id if current else self.next_view_id(),
            type="home",
            user=user,
            body=body,
            hash=self._hash(body),
        )
        self.home_views[user] = view
        return {"ok": True, "view": self._view_json(view)}

    def _open(self, args: dict[str, Any]) -> dict[str, Any]:
        trigger = self.triggers.get(str(args.get("trigger_id") or ""))
        if trigger is None:
            return {"ok": False, "error": "invalid_trigger_id"}
        if trigger.used:
            return {"ok": False, "error": "exchanged_trigger_id"}
        if self.clock() - trigger.issued_at > self.trigger_lifetime:
            return {"ok": False, "error": "expired_trigger_id"}
        problem = view_problem(args.get("view"), kind="modal")
        if problem is not None:
            code, why = problem
            return {"ok": False, "error": code, "response_metadata": {"messages": [why]}}
        trigger.used = True
        body = dict(args["view"])
        view = View(
            id=self.next_view_id(),
            type="modal",
            user=trigger.user,
            body=body,
            hash=self._hash(body),
        )
        self.modals.append(view)
        return {"ok": True, "view": self._view_json(view)}

    def _permalink(self, args: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(args.get("channel") or ""), str(args.get("message_ts") or "")
        if not self.messages.get(channel):
            return {"ok": False, "error": "channel_not_found"}
        message = self.find(channel, ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        link = f"https://{self.domain}.slack.com/archives/{channel}/p{ts.replace('.', '')}"
        if message.thread_ts and message.thread_ts != ts:
            link += f"?thread_ts={message.thread_ts}&cid={channel}"
        return {"ok": True, "channel": channel, "permalink": link}
